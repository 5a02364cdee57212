//! The thread that owns the loaded model and runs its jobs.
//!
//! Loading a model, generating a reply and speaking are jobs; they wait in
//! one first-in-first-out queue, so concurrent requests are served fairly
//! in arrival order. Chats for the model in memory that queue up behind
//! one another are answered together (see [`super::chat_streams`]), each
//! with its own KV cache. Each job reports through an [`EventSink`]; when
//! the sink's receiver has gone (a closed browser tab) or the job's cancel
//! flag is set, the job stops at the next token.

use super::chat_streams::{answer_together, chat_failure, Answered, Prepared, QueuedChat, RequestMaker};
use super::events::{Done, EngineEvent, ErrorKind, Progress};
use super::speech_library::{Clip, SpeechLibrary};
use crate::audio::{wav, Audio};
use crate::cluster::master::ClusterSettings;
use crate::cluster::remote::{Unreachable, WorkerLost};
use crate::library::catalog::ModelEntry;
use crate::models::gpu_offload::{GpuPlacement, GpuRequest};
use crate::speech::model::{BadSpeechRequest, SpeechModel, Voices};
use crate::speech::noise::SeededNoise;
use crate::speech::vibevoice::generate::{SpeechObserver, SpeechSettings};
use crate::text::chat_template::{ChatMessage, RenderOptions};
use crate::text::constraint::OutputFormat;
use crate::text::model::{LoadOptions, TextModel};
use crate::text::prompt_cache::PromptCache;
use crate::text::sampling::SamplingOverrides;
use crate::text::tool_calls::ToolChoice;
use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

/// Receives a job's events; returns `false` once nobody listens any more.
pub type EventSink = Box<dyn FnMut(EngineEvent) -> bool + Send>;

/// A flag the requester sets to stop a job.
pub type CancelFlag = Arc<AtomicBool>;

/// What a reply continues.
#[derive(Debug, Clone)]
pub enum Prompt {
    /// A conversation, rendered with the model's chat template.
    Conversation { messages: Vec<ChatMessage>, options: RenderOptions },
    /// Text as it is (a completion), with the BOS its vocabulary adds;
    /// special tokens spelled in it are read as such.
    Text(String),
}

/// A reply to generate.
#[derive(Debug, Clone)]
pub struct ChatJob {
    pub model: ModelEntry,
    pub prompt: Prompt,
    pub sampling: SamplingOverrides,
    pub max_tokens: usize,
    pub stop: Vec<String>,
    /// Hold at most this many tokens (`None`: the model's context length).
    pub context_length: Option<usize>,
    /// Leave out the oldest turns when the conversation does not fit.
    pub drop_oldest_turns: bool,
    /// The format the reply must follow (none: free text).
    pub format: Option<OutputFormat>,
    /// Whether the reply must call one of the conversation's tools.
    pub tool_choice: ToolChoice,
    /// Keep each token's log-probability and this many alternatives.
    pub logprobs: Option<usize>,
}

/// Speech to generate.
pub struct SpeakJob {
    pub model: ModelEntry,
    pub script: String,
    pub voice_ids: Vec<String>,
    /// The voices, as the model speaks in them.
    pub voices: Voices,
    pub settings: SpeechSettings,
    pub seed: u64,
    /// Keep the result as a clip (the app) or hand back the WAV (the HTTP API).
    pub keep_clip: bool,
    pub library: SpeechLibrary,
}

enum Job {
    Load {
        model: ModelEntry,
        sink: EventSink,
        cancel: CancelFlag,
    },
    Chat(Box<QueuedChat>),
    Unload,
    /// Use these cluster settings and this context length (`None`: the
    /// model's own) for the next loads.
    Configure {
        cluster: Option<ClusterSettings>,
        context_length: Option<usize>,
        gpu: GpuRequest,
    },
    Speak {
        job: Box<SpeakJob>,
        sink: EventSink,
        cancel: CancelFlag,
    },
    Embed {
        model: ModelEntry,
        texts: Vec<String>,
        /// Cut a text longer than the context rather than refuse it.
        truncate: bool,
        sink: EventSink,
        cancel: CancelFlag,
    },
}

/// Handle to the engine thread.
pub struct Engine {
    jobs: Mutex<mpsc::Sender<Job>>,
    loaded: Arc<Mutex<Option<ModelEntry>>>,
    /// Where the loaded model's layers run on this machine.
    placement: Arc<Mutex<Option<GpuPlacement>>>,
}

struct Worker {
    jobs: mpsc::Receiver<Job>,
    /// Jobs taken from `jobs` while chats were answered, in arrival order.
    waiting: VecDeque<Job>,
    options: LoadOptions,
    /// Run models over these workers too, when set.
    cluster: Option<ClusterSettings>,
    model: Option<(ModelEntry, TextModel)>,
    /// The last reply's session on `model`, for the next request to continue.
    prompt_cache: PromptCache,
    /// The speech model in memory (beside the text model).
    speech: Option<(ModelEntry, SpeechModel)>,
    loaded: Arc<Mutex<Option<ModelEntry>>>,
    placement: Arc<Mutex<Option<GpuPlacement>>>,
}

impl Engine {
    /// Starts the engine thread; with `cluster`, models run over its workers too.
    pub fn start(options: LoadOptions, cluster: Option<ClusterSettings>) -> Self {
        let (tx, rx) = mpsc::channel::<Job>();
        let loaded = Arc::new(Mutex::new(None));
        let placement = Arc::new(Mutex::new(None));
        let mut worker = Worker {
            jobs: rx,
            waiting: VecDeque::new(),
            options,
            cluster,
            model: None,
            prompt_cache: PromptCache::new(),
            speech: None,
            loaded: loaded.clone(),
            placement: placement.clone(),
        };
        std::thread::Builder::new()
            .name("cake-engine".into())
            .spawn(move || {
                while let Some(job) = worker.next_job() {
                    worker.run(job);
                }
            })
            .expect("can spawn the engine thread");
        Self { jobs: Mutex::new(tx), loaded, placement }
    }

    /// The model currently in memory.
    pub fn loaded(&self) -> Option<ModelEntry> {
        self.loaded.lock().expect("engine state").clone()
    }

    /// Which of the loaded model's layers run on this machine's GPU.
    pub fn loaded_placement(&self) -> Option<GpuPlacement> {
        self.placement.lock().expect("engine state").clone()
    }

    fn send(&self, job: Job) {
        // The worker thread lives as long as the process.
        let _ = self.jobs.lock().expect("engine queue").send(job);
    }

    /// Queues loading `model`; events: `progress` …, then `done` or `error`.
    pub fn load(&self, model: ModelEntry, sink: EventSink, cancel: CancelFlag) {
        self.send(Job::Load { model, sink, cancel });
    }

    /// Queues a reply; events: `loading` … (if the model must be loaded),
    /// `token` …, then `done` or `error`.
    pub fn chat(&self, job: ChatJob, sink: EventSink, cancel: CancelFlag) {
        self.send(Job::Chat(Box::new(QueuedChat { job, sink, cancel })));
    }

    /// Queues embedding `texts` with `model`; events: `loading` … (if the
    /// model must be loaded), then `done` (the vectors) or `error`.
    pub fn embed(&self, model: ModelEntry, texts: Vec<String>, truncate: bool, sink: EventSink, cancel: CancelFlag) {
        self.send(Job::Embed { model, texts, truncate, sink, cancel });
    }

    /// Queues freeing the loaded model.
    pub fn unload(&self) {
        self.send(Job::Unload);
    }

    /// Queues speech; events: `loading` … (if the model must be loaded),
    /// `progress` …, then `done` or `error`.
    pub fn speak(&self, job: SpeakJob, sink: EventSink, cancel: CancelFlag) {
        self.send(Job::Speak { job: Box::new(job), sink, cancel });
    }

    /// Queues a change of cluster settings, context length and GPU use,
    /// used from the next load on; a model loaded for another context or
    /// GPU use is unloaded.
    pub fn configure(&self, cluster: Option<ClusterSettings>, context_length: Option<usize>, gpu: GpuRequest) {
        self.send(Job::Configure { cluster, context_length, gpu });
    }
}

impl Worker {
    /// The oldest job not yet run; waits for one. `None` once the engine
    /// handle is gone.
    fn next_job(&mut self) -> Option<Job> {
        self.waiting.pop_front().or_else(|| self.jobs.recv().ok())
    }

    /// The oldest job if it is a chat for `model`, without waiting.
    fn next_chat_for(&mut self, model: &ModelEntry) -> Option<QueuedChat> {
        self.waiting.extend(self.jobs.try_iter());
        match self.waiting.front() {
            Some(Job::Chat(chat)) if chat.job.model.id == model.id => {}
            _ => return None,
        }
        match self.waiting.pop_front() {
            Some(Job::Chat(chat)) => Some(*chat),
            _ => unreachable!("the front job was just seen to be a chat"),
        }
    }

    fn run(&mut self, job: Job) {
        // Every event of a job carries what the job is.
        let kind = match &job {
            Job::Load { .. } => "load",
            Job::Chat(_) => "chat",
            Job::Unload => "unload",
            Job::Configure { .. } => "configure",
            Job::Speak { .. } => "speak",
            Job::Embed { .. } => "embed",
        };
        let _span = tracing::info_span!("engine_job", job = kind).entered();
        match job {
            Job::Load { model, mut sink, cancel } => {
                if cancel.load(Ordering::Relaxed) {
                    return;
                }
                let event = match self.ensure_loaded(&model, &mut sink, LoadReport::Progress) {
                    Ok(()) => EngineEvent::Done(Done::Model { model }),
                    Err(failed) => *failed,
                };
                sink(event);
            }
            Job::Chat(mut chat) => {
                if chat.cancel.load(Ordering::Relaxed) {
                    return;
                }
                let loading = self.model.as_ref().is_none_or(|(loaded, _)| loaded.id != chat.job.model.id);
                let started = std::time::Instant::now();
                if let Err(failed) = self.ensure_loaded(&chat.job.model, &mut chat.sink, LoadReport::Loading) {
                    (chat.sink)(*failed);
                    return;
                }
                let load_s = loading.then(|| started.elapsed().as_secs_f64());
                self.answer(*chat, load_s);
            }
            Job::Unload => self.set_model(None),
            Job::Configure { cluster, context_length, gpu } => {
                self.cluster = cluster;
                if self.options.context_length != context_length || self.options.gpu != gpu {
                    self.options.context_length = context_length;
                    self.options.gpu = gpu;
                    self.set_model(None);
                }
            }
            Job::Embed { model, texts, truncate, mut sink, cancel } => {
                if cancel.load(Ordering::Relaxed) {
                    return;
                }
                if let Err(failed) = self.ensure_loaded(&model, &mut sink, LoadReport::Loading) {
                    sink(*failed);
                    return;
                }
                let (entry, loaded) = self.model.as_ref().expect("ensure_loaded succeeded");
                sink(match embed_texts(&entry.name, loaded, &texts, truncate, &cancel) {
                    Ok(done) => EngineEvent::Done(done),
                    Err(failed) => *failed,
                });
            }
            Job::Speak { job, mut sink, cancel } => {
                if cancel.load(Ordering::Relaxed) {
                    return;
                }
                let event = match self.speak(&job, &mut sink, &cancel) {
                    Ok(done) => EngineEvent::Done(done),
                    Err(error) => failure(&error),
                };
                sink(event);
            }
        }
    }

    fn set_model(&mut self, model: Option<(ModelEntry, TextModel)>) {
        if let Some((_, old)) = &self.model {
            self.prompt_cache.clear(old);
        }
        *self.loaded.lock().expect("engine state") = model.as_ref().map(|(e, _)| e.clone());
        *self.placement.lock().expect("engine state") = model.as_ref().map(|(_, m)| m.decoder().gpu.clone());
        self.model = model;
    }

    /// Loads `entry` unless it is already loaded, reporting progress as
    /// `report` says; the error event says why it could not.
    fn ensure_loaded(
        &mut self,
        entry: &ModelEntry,
        sink: &mut EventSink,
        report: LoadReport,
    ) -> Result<(), Box<EngineEvent>> {
        if self.model.as_ref().is_some_and(|(e, _)| e.id == entry.id) {
            return Ok(());
        }
        // Free the old model first: two models at once may not fit.
        self.set_model(None);
        let mut on_progress = throttled_progress(sink, report, &entry.name);
        let loaded = match &self.cluster {
            Some(cluster) => cluster.load(&entry.path, &self.options, &[], &mut on_progress),
            None => TextModel::load_with_progress(&entry.path, &self.options, &mut |done, total| {
                on_progress(done as f64 / total.max(1) as f64, &format!("layer {done} of {total}"))
            }),
        };
        let model = loaded.map_err(|e| Box::new(failure(&e.context(format!("cannot load {}", entry.name)))))?;
        if model.tokenizer.is_none() {
            let message = format!("cannot chat with {}: it has no tokenizer", entry.name);
            return Err(Box::new(EngineEvent::error(ErrorKind::BadRequest, message)));
        }
        self.set_model(Some((entry.clone(), model)));
        Ok(())
    }

    /// Answers `first` and the chats for the same model queued behind it
    /// together. When a worker is lost, the chats under way are told, the
    /// model is planned again over the machines left (at most as many
    /// times as it had workers) and they continue from where they were.
    fn answer(&mut self, first: QueuedChat, load_s: Option<f64>) {
        let (entry, model) = self.model.take().expect("ensure_loaded succeeded");
        let mut cache = std::mem::take(&mut self.prompt_cache);
        let mut recoveries_left = model.pipeline.remote_stages.len();
        let mut chats: Vec<Prepared> = Prepared::new(&RequestMaker::new(&model), first, load_s).into_iter().collect();
        let mut lost_addresses: Vec<String> = Vec::new();
        let mut model = Some(model);
        while let Some(loaded) = &model {
            let Answered::WorkerLost { lost, waiting } =
                answer_together(loaded, &mut cache, chats, || self.next_chat_for(&entry))
            else {
                break;
            };
            cache.clear(loaded);
            if let Some(cluster) = &self.cluster {
                cluster.monitor.worker_lost(&lost.address, &lost.reason);
            }
            // Free the old model first: two at once may not fit.
            model = None;
            let reloaded = if recoveries_left == 0 {
                Err(anyhow::Error::new(lost.clone()))
            } else {
                recoveries_left -= 1;
                lost_addresses.push(lost.address.clone());
                self.reload(&entry, &lost_addresses).map_err(|e| e.context(lost.clone()).context("re-planning failed"))
            };
            chats = waiting;
            match reloaded {
                Ok(again) => {
                    let machines_left = match again.pipeline.remote_stages.len() {
                        0 => "on this machine alone".to_string(),
                        1 => "over this machine and 1 worker".to_string(),
                        n => format!("over this machine and {n} workers"),
                    };
                    let message = format!("{lost}: the reply continues {machines_left}");
                    chats.iter_mut().for_each(|chat| chat.notice(&message));
                    model = Some(again);
                }
                Err(error) => chats.drain(..).for_each(|chat| chat.fail(failure(&error))),
            }
        }
        self.prompt_cache = cache;
        self.set_model(model.map(|model| (entry, model)));
    }

    /// `entry` loaded again without the workers at `lost` addresses.
    fn reload(&self, entry: &ModelEntry, lost: &[String]) -> anyhow::Result<TextModel> {
        match &self.cluster {
            Some(cluster) => cluster.load(&entry.path, &self.options, lost, &mut |_, _| {}),
            None => TextModel::load(&entry.path, &self.options),
        }
    }

    /// Generates speech, loading the speech model first if needed.
    fn speak(&mut self, job: &SpeakJob, sink: &mut EventSink, cancel: &CancelFlag) -> anyhow::Result<Done> {
        if self.speech.as_ref().is_none_or(|(e, _)| e.id != job.model.id) {
            self.speech = None;
            let mut on_progress = throttled_progress(sink, LoadReport::Loading, &job.model.name);
            on_progress(0.0, "loading");
            let model = SpeechModel::load(&job.model.path, self.cluster.as_ref(), &mut on_progress)
                .map_err(|e| anyhow::anyhow!("cannot load {}: {e:#}", job.model.name))?;
            on_progress(1.0, "loaded");
            self.speech = Some((job.model.clone(), model));
        }
        let (_, model) = self.speech.as_ref().expect("just loaded");
        let sample_rate = model.sample_rate();
        let mut observer =
            SpeakProgress { sink, cancel, sample_rate, frames: 0, samples: 0, piece: 0, pieces: 1, steps: None };
        let mut noise = SeededNoise::new(job.seed);
        let output = match model.speak(&job.script, &job.voices, &job.settings, &mut noise, &mut observer) {
            Ok(output) => output,
            Err(e) => {
                if e.downcast_ref::<WorkerLost>().is_some() {
                    // The next clip loads the model again, over the machines left.
                    self.speech = None;
                }
                return Err(e);
            }
        };
        if output.audio.is_empty() {
            anyhow::bail!("the model produced no speech (it chose to end after {} token(s))", output.tokens.len());
        }
        let audio = Audio { samples: output.audio, sample_rate };
        if !job.keep_clip {
            return Ok(Done::Audio { wav_base64: base64_encode(&wav::encode(&audio)?) });
        }
        let clip = Clip {
            id: String::new(),
            script: job.script.clone(),
            voice_ids: job.voice_ids.clone(),
            model_id: job.model.id.clone(),
            duration_s: audio.duration_s(),
            frames: output.frames,
            seed: job.seed,
            cfg_scale: job.settings.cfg_scale,
            steps: job.settings.steps,
            end: serde_json::to_value(output.end)?.as_str().unwrap_or("length").to_string(),
            created_at: String::new(),
        };
        let clip = job.library.add_clip(clip, &audio)?;
        Ok(Done::Clip { clip })
    }
}

/// How a model load reports itself: as the command's own progress
/// (`load_model`) or as the loading step before a chat or speech job.
#[derive(Clone, Copy)]
enum LoadReport {
    Progress,
    Loading,
}

/// The `error` event for a job that failed: the request's fault when the
/// error is one of the request's own (a prompt too long, a bad script),
/// unavailable when a cluster's workers cannot be reached or were lost.
fn failure(error: &anyhow::Error) -> EngineEvent {
    // `downcast_ref` finds a type among the error's contexts and its cause alike.
    let cluster_gone = error.downcast_ref::<WorkerLost>().is_some() || error.downcast_ref::<Unreachable>().is_some();
    if error.downcast_ref::<BadSpeechRequest>().is_some() {
        EngineEvent::error(ErrorKind::BadRequest, format!("{error:#}"))
    } else if cluster_gone {
        EngineEvent::error(ErrorKind::Unavailable, format!("{error:#}"))
    } else {
        chat_failure(error)
    }
}

/// Forwards loading progress to `sink`: every new step at once, updates
/// within a step at most about ten a second (the last always goes). A weight
/// transfer reports every chunk, and a flood of events would only burden
/// the UI; a step that ends within 100 ms is still shown.
fn throttled_progress<'a>(sink: &'a mut EventSink, report: LoadReport, model_name: &str) -> impl FnMut(f64, &str) + 'a {
    let name = model_name.to_string();
    let mut last_sent: Option<(std::time::Instant, String)> = None;
    move |fraction: f64, message: &str| {
        // Each new step is shown at once; updates within a step (the same
        // text before a colon) at most every 100 ms.
        let step = message.split(':').next().unwrap_or(message);
        let same_step = last_sent.as_ref().is_some_and(|(t, last)| last == step && t.elapsed().as_millis() < 100);
        if same_step && fraction < 1.0 {
            return;
        }
        last_sent = Some((std::time::Instant::now(), step.to_string()));
        let message = format!("{name}: {message}");
        sink(match report {
            LoadReport::Progress => EngineEvent::Progress(Progress::Load { fraction, message }),
            LoadReport::Loading => EngineEvent::Loading { fraction, message },
        });
    }
}

/// Reports each frame as it is made, with its audio (to be heard at
/// once), and the piece of a long script it belongs to; stops when the
/// listener has gone.
struct SpeakProgress<'a> {
    sink: &'a mut EventSink,
    cancel: &'a CancelFlag,
    sample_rate: u32,
    /// Frames and samples of audio so far.
    frames: usize,
    samples: usize,
    /// The current piece's sampling steps done, of how many (LuxTTS).
    steps: Option<(usize, usize)>,
    /// The piece being spoken (from 0), of how many.
    piece: usize,
    pieces: usize,
}

impl SpeechObserver for SpeakProgress<'_> {
    fn on_piece(&mut self, piece: usize, pieces: usize) {
        (self.piece, self.pieces, self.steps) = (piece, pieces, None);
    }

    fn on_frame(&mut self, frame: usize, _latent: &candle_core::Tensor, audio: &[f32]) -> ControlFlow<()> {
        let pcm16_base64 = base64_encode(&wav::pcm16(audio));
        let heard = (self.sink)(EngineEvent::Audio { pcm16_base64, sample_rate: self.sample_rate });
        self.frames = frame + 1;
        self.samples += audio.len();
        if heard {
            self.report()
        } else {
            ControlFlow::Break(())
        }
    }

    fn on_step(&mut self, step: usize, steps: usize) -> ControlFlow<()> {
        self.steps = Some((step, steps));
        self.report()
    }
}

impl SpeakProgress<'_> {
    /// Sends the progress so far; breaks when the listener has gone or
    /// cancelled.
    fn report(&mut self) -> ControlFlow<()> {
        let progress = Progress::Speech {
            frames: self.frames,
            seconds: self.samples as f64 / self.sample_rate as f64,
            piece: self.piece + 1,
            pieces: self.pieces,
            step: self.steps.map(|(step, _)| step),
            steps: self.steps.map(|(_, steps)| steps),
        };
        let listening = (self.sink)(EngineEvent::Progress(progress));
        if listening && !self.cancel.load(Ordering::Relaxed) {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    }
}

/// Standard base64 (for WAV bytes in JSON).
pub fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The vectors of `texts` on the embedding model `model` (named `name`).
fn embed_texts(
    name: &str,
    model: &TextModel,
    texts: &[String],
    truncate: bool,
    cancel: &CancelFlag,
) -> Result<Done, Box<EngineEvent>> {
    let Some(spec) = model.embedding else {
        let message = format!(
            "{name} makes no embeddings: it is a chat model (an embedding model, such as Qwen3-Embedding, says how \
             it pools in its sentence-transformers files or GGUF metadata)"
        );
        return Err(Box::new(EngineEvent::error(ErrorKind::BadRequest, message)));
    };
    let failed = |e: anyhow::Error| Box::new(EngineEvent::error(ErrorKind::Failed, format!("{e:#}")));
    let tokenizer = model.tokenizer().map_err(failed)?;
    let context = model.decoder().context_length();
    let (mut embeddings, mut prompt_tokens) = (Vec::with_capacity(texts.len()), 0);
    for (index, text) in texts.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            return Err(Box::new(EngineEvent::error(ErrorKind::Failed, "cancelled")));
        }
        let mut tokens = tokenizer.encode(text, true).map_err(failed)?;
        if truncate {
            tokens.truncate(context);
        }
        if tokens.len() > context {
            let message = format!("input {index} has {} tokens but the context length is {context}", tokens.len());
            return Err(Box::new(EngineEvent::error(ErrorKind::PromptTooLong, message)));
        }
        prompt_tokens += tokens.len();
        embeddings.push(crate::text::embedding::embed(model, spec, &tokens).map_err(failed)?);
    }
    Ok(Done::Embeddings { embeddings, prompt_tokens })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn progress_shows_every_step_and_thins_out_updates_within_one() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        let mut sink: EventSink = Box::new(move |event| {
            if let EngineEvent::Progress(Progress::Load { message, .. }) = event {
                kept.lock().unwrap().push(message);
            }
            true
        });
        let mut progress = throttled_progress(&mut sink, LoadReport::Progress, "m");
        progress(0.0, "w loads layers 1–2");
        progress(0.1, "sending w the weights of layers 1–2: 1 of 3 MB");
        progress(0.2, "sending w the weights of layers 1–2: 2 of 3 MB");
        progress(0.5, "loading layers here: 1 of 2");
        progress(1.0, "loading layers here: 2 of 2");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                "m: w loads layers 1–2",
                "m: sending w the weights of layers 1–2: 1 of 3 MB",
                "m: loading layers here: 1 of 2",
                "m: loading layers here: 2 of 2"
            ]
        );
    }
}
