//! Replies decoded together: the chats queued for the loaded model run as
//! streams of one batch, so that four conversations cost little more per
//! step than one (a decode step's time goes mostly to reading weights).
//!
//! Chats join in queue order while fewer than [`MAX_STREAMS`] run; each
//! round reads one prompt chunk of each stream still reading (so a long
//! prompt does not freeze the others' replies for its whole length), takes
//! first tokens, then one decode step for all decoding streams together.
//! A stream whose listener has gone or whose cancel flag is set stops at
//! its next token, as a reply alone does.

use super::engine::{CancelFlag, ChatJob, EventSink};
use super::events::{Done, EngineEvent, ErrorKind, Progress, ReplyStats};
use crate::text::chat_template::ChatMessage;
use crate::text::context_fit::drop_oldest_turns;
use crate::text::generation::{
    context_length, step_together, GenerationEvent, GenerationRequest, Phase, PromptTooLong, Stream,
};
use crate::text::model::TextModel;
use crate::text::prompt_cache::PromptCache;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

/// The most replies decoded together.
pub const MAX_STREAMS: usize = 8;

/// A chat waiting in the engine's queue.
pub struct QueuedChat {
    pub job: ChatJob,
    pub sink: EventSink,
    pub cancel: CancelFlag,
}

/// A chat's generation request (the conversation rendered and tokenized,
/// its oldest turns left out if it asked for that) and how many messages
/// were left out.
pub fn chat_request(model: &TextModel, job: &ChatJob) -> anyhow::Result<(GenerationRequest, usize)> {
    let (template, tokenizer) = (model.chat_template()?, model.tokenizer()?);
    let tokenize = |messages: &[ChatMessage]| tokenizer.encode(&template.render(messages, true)?, false);
    let mut request = GenerationRequest::new(Vec::new());
    request.context_limit = job.context_length;
    let mut dropped_messages = 0;
    request.prompt_tokens = if job.drop_oldest_turns {
        let context = context_length(model, &request);
        // Room for a reply: the whole budget, or a quarter of the context.
        let reserve = job.max_tokens.min(context / 4);
        let fitted = drop_oldest_turns(&job.messages, context, reserve, tokenize)?;
        dropped_messages = fitted.dropped_messages;
        fitted.tokens
    } else {
        tokenize(&job.messages)?
    };
    request.max_new_tokens = job.max_tokens;
    request.stop_strings = job.stop.clone();
    request.sampling = job.sampling.apply_to(&model.sampling_defaults);
    Ok((request, dropped_messages))
}

/// Passes a generation event on to a chat's listener; `Break` once the
/// listener has gone or the chat was cancelled.
pub fn relay(sink: &mut EventSink, cancel: &CancelFlag, event: GenerationEvent) -> ControlFlow<()> {
    let listening = match event {
        GenerationEvent::PromptRead { read, total } => {
            sink(EngineEvent::Progress(Progress::Prompt { read_tokens: read, prompt_tokens: total }))
        }
        GenerationEvent::Token(token) => {
            token.text.is_empty() || sink(EngineEvent::Token { text: token.text.to_string() })
        }
    };
    if listening && !cancel.load(Ordering::Relaxed) {
        ControlFlow::Continue(())
    } else {
        ControlFlow::Break(())
    }
}

/// The event for a chat that failed: the request's fault when its prompt
/// does not fit.
pub fn chat_failure(error: &anyhow::Error) -> EngineEvent {
    let kind = match error.downcast_ref::<PromptTooLong>() {
        Some(_) => ErrorKind::PromptTooLong,
        None => ErrorKind::Failed,
    };
    EngineEvent::error(kind, format!("{error:#}"))
}

/// A chat being answered.
struct Answering<'m> {
    stream: Stream<'m>,
    sink: EventSink,
    cancel: CancelFlag,
    prompt_tokens: usize,
    dropped_messages: usize,
    /// Seconds spent loading the model for this chat, if it had to be.
    load_s: Option<f64>,
    /// The most chats decoded in one step with this one (itself included).
    decoded_together: usize,
    /// The error event that ended it, if one did.
    failed: Option<EngineEvent>,
}

impl<'m> Answering<'m> {
    fn start(model: &'m TextModel, cache: &mut PromptCache, chat: QueuedChat, load_s: Option<f64>) -> Option<Self> {
        let QueuedChat { job, mut sink, cancel } = chat;
        if cancel.load(Ordering::Relaxed) {
            return None;
        }
        let started = chat_request(model, &job).and_then(|(request, dropped_messages)| {
            let prompt_tokens = request.prompt_tokens.len();
            Ok((Stream::start(model, request, cache)?, prompt_tokens, dropped_messages))
        });
        match started {
            Ok((stream, prompt_tokens, dropped_messages)) => Some(Self {
                stream,
                sink,
                cancel,
                prompt_tokens,
                dropped_messages,
                load_s,
                decoded_together: 1,
                failed: None,
            }),
            Err(error) => {
                sink(chat_failure(&error));
                None
            }
        }
    }

    fn is_over(&self) -> bool {
        self.failed.is_some() || self.stream.phase() == Phase::Finished
    }

    /// Reads a prompt chunk or takes the first token, whichever is next.
    fn advance_alone(&mut self) {
        let Self { stream, sink, cancel, .. } = self;
        let mut listen = |event: GenerationEvent| relay(sink, cancel, event);
        let result = match stream.phase() {
            Phase::ReadingPrompt => stream.read_prompt_chunk(&mut listen),
            Phase::FirstToken => stream.step(&mut listen),
            Phase::Decoding | Phase::Finished => Ok(()),
        };
        if let Err(error) = result {
            self.failed = Some(chat_failure(&error));
        }
    }

    /// Sends the chat's last event: its error, or the reply and its stats.
    fn end(self, cache: &mut PromptCache) {
        let Self { stream, mut sink, cancel, prompt_tokens, dropped_messages, load_s, decoded_together, failed } = self;
        if let Some(event) = failed {
            sink(event);
            return;
        }
        let event = match stream.finish(cache, &mut |event: GenerationEvent| relay(&mut sink, &cancel, event)) {
            Ok(reply) => EngineEvent::Done(Done::Reply {
                stats: ReplyStats {
                    prompt_tokens,
                    dropped_messages,
                    cached_prompt_tokens: reply.cached_prompt_tokens,
                    completion_tokens: reply.tokens.len(),
                    ttft_s: reply.timings.ttft_s,
                    decode_tok_s: reply.timings.decode_tok_s,
                    finish_reason: reply.finish_reason,
                    load_s,
                    decoded_together,
                },
                text: reply.text,
            }),
            Err(error) => chat_failure(&error),
        };
        sink(event);
    }
}

/// Answers `first` (with `load_s` the time its model took to load, if it
/// had to) and every chat `next_chat` hands over while streams run, at
/// most [`MAX_STREAMS`] at once; returns when all are answered and
/// `next_chat` has no more.
pub fn answer_together(
    model: &TextModel,
    cache: &mut PromptCache,
    first: QueuedChat,
    load_s: Option<f64>,
    mut next_chat: impl FnMut() -> Option<QueuedChat>,
) {
    let mut answering: Vec<Answering> = Vec::new();
    answering.extend(Answering::start(model, cache, first, load_s));
    loop {
        while answering.len() < MAX_STREAMS {
            let Some(chat) = next_chat() else { break };
            answering.extend(Answering::start(model, cache, chat, None));
        }
        if answering.is_empty() {
            return;
        }
        for chat in answering.iter_mut() {
            chat.advance_alone();
        }
        decode_step(model, &mut answering);
        let (over, going): (Vec<_>, Vec<_>) = answering.into_iter().partition(Answering::is_over);
        answering = going;
        for chat in over {
            chat.end(cache);
        }
    }
}

/// One decode step of every decoding chat together; a failure ends them all.
fn decode_step(model: &TextModel, answering: &mut [Answering]) {
    let mut decoding: Vec<&mut Answering> =
        answering.iter_mut().filter(|c| c.failed.is_none() && c.stream.phase() == Phase::Decoding).collect();
    if decoding.is_empty() {
        return;
    }
    let mut streams = Vec::with_capacity(decoding.len());
    let mut listeners = Vec::with_capacity(decoding.len());
    let together = decoding.len();
    for chat in decoding.iter_mut() {
        chat.decoded_together = chat.decoded_together.max(together);
        streams.push(&mut chat.stream);
        listeners.push((&mut chat.sink, &chat.cancel));
    }
    let result = step_together(model, &mut streams, |index, event| {
        let (sink, cancel) = &mut listeners[index];
        relay(sink, cancel, event)
    });
    if let Err(error) = result {
        let message = format!("{error:#}");
        for chat in decoding {
            chat.failed = Some(EngineEvent::error(ErrorKind::Failed, message.clone()));
        }
    }
}
