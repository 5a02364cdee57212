//! Replies decoded together: the chats queued for the loaded model run as
//! streams of one batch, so that four conversations cost little more per
//! step than one (a decode step's time goes mostly to reading weights).
//!
//! A chat's conversation is rendered and tokenized on a thread of its own
//! while the others decode (a long prompt costs no one else a token). Chats
//! join while fewer than [`MAX_STREAMS`] run and their KV caches, as filled
//! now plus a round's growth, fit the context length the model was planned
//! for (the memory its plan counted): a reply allowed many tokens reserves
//! nothing it has not used, so it cannot keep a short chat waiting. When the
//! caches together would outgrow that memory, the chat holding the most
//! positions gives way and continues, from where it was, once there is room.
//! Each round reads one prompt chunk of each stream still reading (so a long
//! prompt does not freeze the others' replies for its whole length), takes
//! first tokens, then one decode step for all decoding streams together.
//! A stream whose listener has gone or whose cancel flag is set stops at
//! its next token, as a reply alone does. When a worker of a cluster is
//! lost, every chat under way is handed back with what it generated so far,
//! to continue once the pipeline is rebuilt over the machines left.

use super::engine::{CancelFlag, ChatJob, EventSink, Prompt};
use super::events::{Done, EngineEvent, ErrorKind, Progress, ReplyStats};
use crate::cluster::remote::WorkerLost;
use crate::text::chat_template::{ChatMessage, ChatTemplate, RenderOptions};
use crate::text::constraint::BadOutputFormat;
use crate::text::context_fit::drop_oldest_turns;
use crate::text::generation::{
    context_within, step_pipelined, GenerationEvent, GenerationRequest, Phase, PromptTooLong, Stream, PIPELINED_STEPS,
};
use crate::text::logprobs::{readable, TokenLogprob};
use crate::text::model::TextModel;
use crate::text::pictures::PicturesRefused;
use crate::text::prompt_cache::PromptCache;
use crate::text::reasoning::{ReasoningSplitter, ReplyPart, THINK_OPEN};
use crate::text::sampling::SamplingParams;
use crate::text::tokenizer::{SpecialTokenInMessage, TextTokenizer};
use crate::text::tool_calls::{ToolCall, ToolCallSplitter, ToolChoice};
use crate::text::turn_prompt::{tokenize_turns, turn_pictures};
use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::thread::ScopedJoinHandle;

/// The most replies decoded together.
pub const MAX_STREAMS: usize = 8;

/// A chat waiting in the engine's queue.
pub struct QueuedChat {
    pub job: ChatJob,
    pub sink: EventSink,
    pub cancel: CancelFlag,
}

/// A prompt's text is refused untokenized when it is longer than the
/// context's tokens times the longest token's bytes times this: room for
/// normalizers that make text shorter before it is split.
const NORMALIZER_SLACK: usize = 4;

/// What turning chats into generation requests needs of a model; shared by
/// the threads that tokenize them.
pub struct RequestMaker<'m> {
    model: &'m TextModel,
    /// The chat template and tokenizer, or why the model has none.
    parts: Result<(ChatTemplate, &'m TextTokenizer), String>,
    model_context: usize,
    sampling_defaults: &'m SamplingParams,
}

impl<'m> RequestMaker<'m> {
    pub fn new(model: &'m TextModel) -> Self {
        let parts = model.chat_template().and_then(|template| Ok((template, model.tokenizer()?)));
        Self {
            model,
            parts: parts.map_err(|e| format!("{e:#}")),
            model_context: model.decoder().context_length(),
            sampling_defaults: &model.sampling_defaults,
        }
    }

    /// A chat's generation request (the conversation rendered and
    /// tokenized, its oldest turns left out if it asked for that). A text
    /// far longer than the context is refused before it is tokenized.
    fn make(&self, job: &ChatJob) -> anyhow::Result<MadeRequest> {
        let (template, tokenizer) = self.parts.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
        let context = context_within(self.model_context, job.context_length);
        let most_bytes = context.saturating_mul(tokenizer.longest_token_bytes()).saturating_mul(NORMALIZER_SLACK);
        // Whether the last prompt rendered ends inside a reasoning block.
        let prompt_opens_block = std::cell::Cell::new(false);
        let no_options = RenderOptions::default();
        let options = match &job.prompt {
            Prompt::Conversation { options, .. } => options,
            Prompt::Text(_) => &no_options,
        };
        let tokenize = |messages: &[ChatMessage]| {
            let text = template.render_prompt(messages, options)?;
            prompt_opens_block.set(text.trim_end().ends_with(THINK_OPEN));
            if text.len() > most_bytes {
                let at_least = text.len() / (tokenizer.longest_token_bytes() * NORMALIZER_SLACK).max(1);
                return Err(PromptTooLong::new(at_least, context, true).into());
            }
            tokenize_turns(self.model, &text, messages)
        };
        let mut request = GenerationRequest::new(Vec::new());
        request.context_limit = job.context_length;
        let mut dropped_messages = 0;
        request.prompt_tokens = match &job.prompt {
            Prompt::Text(text) if text.len() > most_bytes => {
                let at_least = text.len() / (tokenizer.longest_token_bytes() * NORMALIZER_SLACK).max(1);
                return Err(PromptTooLong::new(at_least, context, true).into());
            }
            Prompt::Text(text) => tokenizer.encode(text, true)?,
            Prompt::Conversation { messages, .. } if job.drop_oldest_turns => {
                let fitted = drop_oldest_turns(messages, context, reply_room(job, context), tokenize)?;
                dropped_messages = fitted.dropped_messages;
                fitted.tokens
            }
            Prompt::Conversation { messages, .. } => {
                // Too long: say whether leaving out the oldest turns would do.
                let overflow = |too_long: PromptTooLong| match drop_oldest_turns(
                    messages,
                    context,
                    reply_room(job, context),
                    tokenize,
                ) {
                    Err(alone) if alone.is::<PromptTooLong>() => alone,
                    _ => too_long.into(),
                };
                match tokenize(messages) {
                    Ok(tokens) if tokens.len() >= context => {
                        return Err(overflow(PromptTooLong::new(tokens.len(), context, false)))
                    }
                    Ok(tokens) => tokens,
                    Err(error) => match error.downcast::<PromptTooLong>() {
                        Ok(too_long) => return Err(overflow(too_long)),
                        Err(error) => return Err(error),
                    },
                }
            }
        };
        if let Prompt::Conversation { messages, .. } = &job.prompt {
            request.pictures = turn_pictures(self.model, &request.prompt_tokens, &kept(messages, dropped_messages))?;
        }
        request.max_new_tokens = job.max_tokens;
        request.logprobs = job.logprobs;
        request.stop_strings = job.stop.clone();
        request.sampling = job.sampling.apply_to(self.sampling_defaults);
        let mut format = job.format.clone();
        let mut syntax = template.tool_call_syntax();
        if let (Some(tools), ToolChoice::Required | ToolChoice::Named(_)) = (&options.tools, &job.tool_choice) {
            if format.is_some() {
                return Err(
                    BadOutputFormat("a response format and a forced tool call exclude each other".into()).into()
                );
            }
            let only = match &job.tool_choice {
                ToolChoice::Named(name) => Some(name.as_str()),
                _ => None,
            };
            let (forced, read_as) = syntax.forced_call(tools, only, prompt_opens_block.get());
            (format, syntax) = (Some(forced), read_as);
        }
        if let Some(format) = &format {
            request.constraint = Some(self.model.constraint_compiler()?.compile(format)?);
        }
        let thinks = template.thinks() && matches!(job.prompt, Prompt::Conversation { .. });
        let reasoning = thinks.then(|| ReasoningSplitter::new(prompt_opens_block.get()));
        let calls = options.tools.clone().map(|tools| ToolCallSplitter::new(syntax, tools));
        if calls.is_some() {
            request.shown_special_tokens = syntax.markers().iter().filter_map(|m| tokenizer.token_id(m)).collect();
        }
        Ok(MadeRequest { request, dropped_messages, reply: ReplyText::new(reasoning, calls) })
    }
}

/// The messages a prompt holds when the `dropped` oldest turns after the
/// system messages were left out.
fn kept(messages: &[ChatMessage], dropped: usize) -> Vec<ChatMessage> {
    let system = messages.iter().take_while(|m| m.role == "system").count();
    messages[..system].iter().chain(messages[system + dropped..].iter()).cloned().collect()
}

/// Room a conversation keeps for its reply when its oldest turns are left
/// out: the whole budget, or a quarter of the context.
fn reply_room(job: &ChatJob, context: usize) -> usize {
    job.max_tokens.min(context / 4)
}

/// What [`RequestMaker::make`] gives.
struct MadeRequest {
    request: GenerationRequest,
    /// Messages left out, oldest first, so the rest fit the context.
    dropped_messages: usize,
    reply: ReplyText,
}

/// A reply's text as it goes out: its reasoning kept apart from its
/// answer when the model's template writes reasoning blocks, and function
/// calls read from the answer when the request offered tools.
struct ReplyText {
    reasoning_splitter: Option<ReasoningSplitter>,
    call_splitter: Option<ToolCallSplitter>,
    answer: String,
    reasoning: String,
    tool_calls: Vec<ToolCall>,
}

impl ReplyText {
    fn new(reasoning_splitter: Option<ReasoningSplitter>, call_splitter: Option<ToolCallSplitter>) -> Self {
        let (answer, reasoning, tool_calls) = Default::default();
        Self { reasoning_splitter, call_splitter, answer, reasoning, tool_calls }
    }

    /// The events for `piece` of the reply.
    fn push(&mut self, piece: &str) -> Vec<EngineEvent> {
        let parts = match &mut self.reasoning_splitter {
            Some(splitter) => splitter.push(piece),
            None => vec![ReplyPart::Answer(piece.to_string())],
        };
        self.events(parts)
    }

    /// The events for what is still held when the reply ends; its calls are kept.
    fn finish(&mut self) -> Vec<EngineEvent> {
        let parts = self.reasoning_splitter.as_mut().map(ReasoningSplitter::finish).unwrap_or_default();
        let mut events = self.events(parts);
        if let Some(end) = self.call_splitter.as_mut().map(ToolCallSplitter::finish) {
            self.tool_calls = end.calls;
            events.extend(self.answer_event(end.text));
        }
        events
    }

    fn events(&mut self, parts: Vec<ReplyPart>) -> Vec<EngineEvent> {
        let mut events = Vec::new();
        for part in parts {
            match part {
                ReplyPart::Answer(text) => {
                    let text = match &mut self.call_splitter {
                        Some(splitter) => splitter.push(&text),
                        None => text,
                    };
                    events.extend(self.answer_event(text));
                }
                ReplyPart::Reasoning(text) if text.is_empty() => {}
                ReplyPart::Reasoning(text) => {
                    self.reasoning.push_str(&text);
                    events.push(EngineEvent::Reasoning { text });
                }
            }
        }
        events
    }

    fn answer_event(&mut self, text: String) -> Option<EngineEvent> {
        self.answer.push_str(&text);
        (!text.is_empty()).then_some(EngineEvent::Token { text })
    }
}

/// The event for a chat that failed: the request's fault when its prompt
/// does not fit or spells a special token the template hides.
pub fn chat_failure(error: &anyhow::Error) -> EngineEvent {
    let kind = if let Some(too_long) = error.downcast_ref::<PromptTooLong>() {
        if too_long.last_turn_alone {
            ErrorKind::LastTurnTooLong
        } else {
            ErrorKind::PromptTooLong
        }
    } else if error.downcast_ref::<SpecialTokenInMessage>().is_some()
        || error.downcast_ref::<BadOutputFormat>().is_some()
        || error.downcast_ref::<PicturesRefused>().is_some()
    {
        ErrorKind::BadRequest
    } else {
        ErrorKind::Failed
    };
    EngineEvent::error(kind, format!("{error:#}"))
}

/// What a chat carries from its arrival to its last event.
struct ChatState {
    sink: EventSink,
    cancel: CancelFlag,
    /// The reply's text so far (across continuations).
    reply: ReplyText,
    /// The conversation's prompt tokens (before any continuation).
    prompt_tokens: usize,
    dropped_messages: usize,
    /// Seconds spent loading the model for this chat, if it had to be.
    load_s: Option<f64>,
    /// The most chats decoded in one step with this one (itself included).
    decoded_together: usize,
    /// The most groups of chats whose steps were in flight across the
    /// cluster at once while this one decoded.
    groups_in_flight: usize,
    /// Tokens generated before a worker was lost, and their log-probabilities.
    earlier_tokens: Vec<u32>,
    earlier_logprobs: Vec<TokenLogprob>,
}

impl ChatState {
    /// Passes a generation event on to the chat's listener; `Break` once
    /// the listener has gone or the chat was cancelled.
    fn relay(&mut self, event: GenerationEvent) -> ControlFlow<()> {
        let listening = match event {
            GenerationEvent::PromptRead { read, total } => {
                (self.sink)(EngineEvent::Progress(Progress::Prompt { read_tokens: read, prompt_tokens: total }))
            }
            GenerationEvent::Token(token) => self.reply.push(token.text).into_iter().all(|event| (self.sink)(event)),
        };
        if listening && !self.cancel.load(Ordering::Relaxed) {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    }
}

/// A chat with its request ready, waiting for room among the answered
/// ones (or to continue after a lost worker).
pub struct Prepared {
    state: ChatState,
    request: GenerationRequest,
}

impl Prepared {
    /// Renders and tokenizes `chat`'s conversation; a chat already
    /// cancelled gives `None`, one that cannot run is told why.
    pub fn new(maker: &RequestMaker, chat: QueuedChat, load_s: Option<f64>) -> Option<Self> {
        let QueuedChat { job, mut sink, cancel } = chat;
        if cancel.load(Ordering::Relaxed) {
            return None;
        }
        match maker.make(&job) {
            Ok(MadeRequest { request, dropped_messages, reply }) => Some(Self {
                state: ChatState {
                    sink,
                    cancel,
                    reply,
                    prompt_tokens: request.prompt_tokens.len(),
                    dropped_messages,
                    load_s,
                    decoded_together: 1,
                    groups_in_flight: 1,
                    earlier_tokens: Vec::new(),
                    earlier_logprobs: Vec::new(),
                },
                request,
            }),
            Err(error) => {
                sink(chat_failure(&error));
                None
            }
        }
    }

    /// KV cache positions the chat needs to start: its prompt and a first token.
    fn positions_to_start(&self) -> usize {
        self.request.prompt_tokens.len().saturating_add(1)
    }

    /// Tells the chat's listener `message` (a lost worker, say).
    pub fn notice(&mut self, message: &str) {
        (self.state.sink)(EngineEvent::Notice { message: message.to_string() });
    }

    /// Ends the chat with `event` (an error).
    pub fn fail(mut self, event: EngineEvent) {
        (self.state.sink)(event);
    }
}

/// A chat being answered.
struct Answering<'m> {
    stream: Stream<'m>,
    state: ChatState,
    /// The error event that ended it, if one did.
    failed: Option<EngineEvent>,
}

impl<'m> Answering<'m> {
    fn start(model: &'m TextModel, cache: &mut PromptCache, prepared: Prepared) -> Option<Self> {
        let Prepared { mut state, request } = prepared;
        match Stream::start(model, request, cache) {
            Ok(stream) => Some(Self { stream, state, failed: None }),
            Err(error) => {
                (state.sink)(chat_failure(&error));
                None
            }
        }
    }

    fn is_over(&self) -> bool {
        self.failed.is_some() || self.stream.phase() == Phase::Finished || self.state.cancel.load(Ordering::Relaxed)
    }

    /// KV cache positions the chat holds (its prompt counted whole from
    /// the start, however much of it is read yet).
    fn positions(&self) -> usize {
        self.stream.request().prompt_tokens.len() + self.stream.generated().len()
    }

    /// Reads a prompt chunk or takes the first token, whichever is next; a
    /// lost worker stops the round (the pipeline cannot go on).
    fn advance_alone(&mut self) -> Result<(), WorkerLost> {
        let Self { stream, state, .. } = self;
        let mut listen = |event: GenerationEvent| state.relay(event);
        let result = match stream.phase() {
            Phase::ReadingPrompt => stream.read_prompt_chunk(&mut listen),
            Phase::FirstToken => stream.step(&mut listen),
            Phase::Decoding | Phase::Finished => Ok(()),
        };
        match result {
            Ok(()) => Ok(()),
            Err(error) => match error.downcast::<WorkerLost>() {
                Ok(lost) => Err(lost),
                Err(error) => {
                    self.failed = Some(chat_failure(&error));
                    Ok(())
                }
            },
        }
    }

    /// The chat as it stands, to continue after the pipeline is rebuilt:
    /// its prompt extended by what it generated, its budget reduced.
    fn into_continuation(self) -> Prepared {
        let Self { stream, mut state, .. } = self;
        let mut request = stream.request().clone();
        request.prompt_tokens.extend_from_slice(stream.generated());
        request.max_new_tokens -= stream.generated().len();
        state.earlier_tokens.extend_from_slice(stream.generated());
        state.earlier_logprobs.extend_from_slice(stream.logprobs());
        Prepared { state, request }
    }

    /// Sends the chat's last event: its error, or the reply and its stats.
    fn end(self, cache: &mut PromptCache) {
        let Self { mut stream, mut state, failed, .. } = self;
        if let Some(event) = failed {
            (state.sink)(event);
            return;
        }
        if state.cancel.load(Ordering::Relaxed) {
            stream.cancel();
        }
        let tokenizer = stream.model().tokenizer.as_ref();
        let finished = stream.finish(cache, &mut |event: GenerationEvent| state.relay(event));
        for event in state.reply.finish() {
            (state.sink)(event);
        }
        let event = match finished {
            Ok(mut reply) => EngineEvent::Done(Done::Reply {
                logprobs: match tokenizer {
                    Some(tokenizer) if !reply.logprobs.is_empty() => {
                        let mut all = std::mem::take(&mut state.earlier_logprobs);
                        all.append(&mut reply.logprobs);
                        readable(tokenizer, &all)
                    }
                    _ => Vec::new(),
                },
                stats: ReplyStats {
                    prompt_tokens: state.prompt_tokens,
                    dropped_messages: state.dropped_messages,
                    cached_prompt_tokens: reply.cached_prompt_tokens,
                    completion_tokens: state.earlier_tokens.len() + reply.tokens.len(),
                    ttft_s: reply.timings.ttft_s,
                    decode_tok_s: reply.timings.decode_tok_s,
                    finish_reason: reply.finish_reason,
                    load_s: state.load_s,
                    decoded_together: state.decoded_together,
                    groups_in_flight: state.groups_in_flight,
                },
                text: std::mem::take(&mut state.reply.answer),
                reasoning: std::mem::take(&mut state.reply.reasoning),
                tool_calls: std::mem::take(&mut state.reply.tool_calls),
            }),
            Err(error) => chat_failure(&error),
        };
        (state.sink)(event);
    }
}

/// How [`answer_together`] ended.
pub enum Answered {
    /// Every chat got its last event.
    All,
    /// A worker was lost: these chats (continuations of those under way,
    /// then those not started) wait for the pipeline to be rebuilt.
    WorkerLost { lost: WorkerLost, waiting: Vec<Prepared> },
}

/// Answers the chats `first` and those `next_chat` hands over while
/// streams run: at most [`MAX_STREAMS`] at once, while their KV caches fit
/// the model's context length (see the module's notes). Returns when all
/// are answered and `next_chat` has no more, or when a worker is lost.
pub fn answer_together(
    model: &TextModel,
    cache: &mut PromptCache,
    first: Vec<Prepared>,
    mut next_chat: impl FnMut() -> Option<QueuedChat>,
) -> Answered {
    let budget = model.decoder().context_length();
    let maker = RequestMaker::new(model);
    let mut waiting: VecDeque<Prepared> = first.into();
    let mut answering: Vec<Answering> = Vec::new();
    std::thread::scope(|scope| {
        // Chats being tokenized, in arrival order.
        let mut preparing: VecDeque<ScopedJoinHandle<Option<Prepared>>> = VecDeque::new();
        let lost = loop {
            while preparing.len() + waiting.len() < MAX_STREAMS {
                let Some(chat) = next_chat() else { break };
                let maker = &maker;
                preparing.push_back(scope.spawn(move || Prepared::new(maker, chat, None)));
            }
            // Chats tokenized by now wait their turn; with nothing else to
            // do, wait for the next chat's tokens.
            let must_wait = |waiting: &VecDeque<Prepared>| answering.is_empty() && waiting.is_empty();
            while preparing.front().is_some_and(|p| p.is_finished() || must_wait(&waiting)) {
                let prepared = preparing.pop_front().expect("not empty").join();
                waiting.extend(prepared.unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            }
            // Stopped chats end before another is let in beside them.
            answering = end_finished(std::mem::take(&mut answering), cache);
            admit(model, cache, &mut waiting, &mut answering, budget);
            if answering.is_empty() {
                if preparing.is_empty() {
                    return Answered::All;
                }
                continue;
            }
            give_way(&mut waiting, &mut answering, budget);
            if let Err(lost) = answering.iter_mut().try_for_each(Answering::advance_alone) {
                break lost;
            }
            if let Err(lost) = decode_step(model, &mut answering) {
                break lost;
            }
            answering = end_finished(std::mem::take(&mut answering), cache);
        };
        let going = end_finished(std::mem::take(&mut answering), cache);
        let mut continuations: Vec<Prepared> = going.into_iter().map(Answering::into_continuation).collect();
        continuations.extend(waiting.drain(..));
        for prepared in preparing {
            continuations.extend(prepared.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        Answered::WorkerLost { lost, waiting: continuations }
    })
}

/// KV cache positions one round adds to a decoding chat at most.
const ROUND_GROWTH: usize = PIPELINED_STEPS;

/// Starts the waiting chats, in arrival order, that fit beside those
/// answering (the first always starts when none is answered); a chat that
/// does not fit lets later, smaller ones go first.
fn admit<'m>(
    model: &'m TextModel,
    cache: &mut PromptCache,
    waiting: &mut VecDeque<Prepared>,
    answering: &mut Vec<Answering<'m>>,
    budget: usize,
) {
    let mut index = 0;
    while index < waiting.len() && answering.len() < MAX_STREAMS {
        let held: usize = answering.iter().map(Answering::positions).sum();
        let growth = ROUND_GROWTH * (answering.len() + 1);
        let fits = held.saturating_add(growth).saturating_add(waiting[index].positions_to_start()) <= budget;
        if answering.is_empty() || fits {
            let prepared = waiting.remove(index).expect("in range");
            answering.extend(Answering::start(model, cache, prepared));
        } else {
            index += 1;
        }
    }
}

/// While the answered chats' caches would outgrow `budget` in the next
/// round, the one holding the most positions stops and waits to continue
/// from where it was (its generated tokens become part of its prompt).
fn give_way(waiting: &mut VecDeque<Prepared>, answering: &mut Vec<Answering>, budget: usize) {
    while answering.len() > 1 {
        let held: usize = answering.iter().map(Answering::positions).sum();
        if held.saturating_add(ROUND_GROWTH * answering.len()) <= budget {
            return;
        }
        let going = (0..answering.len()).filter(|&i| !answering[i].is_over());
        let Some(largest) = going.max_by_key(|&i| answering[i].positions()) else { return };
        let chat = answering.remove(largest);
        tracing::info!(positions = chat.positions(), "a reply waits for room in the KV cache");
        waiting.push_back(chat.into_continuation());
    }
}

/// Sends the last event of the chats that are over; returns the others.
fn end_finished<'m>(answering: Vec<Answering<'m>>, cache: &mut PromptCache) -> Vec<Answering<'m>> {
    let (over, going): (Vec<_>, Vec<_>) = answering.into_iter().partition(Answering::is_over);
    for chat in over {
        chat.end(cache);
    }
    going
}

/// One decode step of every decoding chat together; a lost worker
/// interrupts, another failure ends them all.
fn decode_step(model: &TextModel, answering: &mut [Answering]) -> Result<(), WorkerLost> {
    // A prompt being read gets its next chunk after each step, not after a round.
    let prompt_waits = answering.iter().any(|c| c.failed.is_none() && c.stream.phase() == Phase::ReadingPrompt);
    let most_steps = if prompt_waits { 1 } else { PIPELINED_STEPS };
    let mut decoding: Vec<&mut Answering> =
        answering.iter_mut().filter(|c| c.failed.is_none() && c.stream.phase() == Phase::Decoding).collect();
    if decoding.is_empty() {
        return Ok(());
    }
    let mut streams = Vec::with_capacity(decoding.len());
    let mut listeners = Vec::with_capacity(decoding.len());
    let together = decoding.len();
    for chat in decoding.iter_mut() {
        let Answering { stream, state, .. } = &mut **chat;
        state.decoded_together = state.decoded_together.max(together);
        streams.push(stream);
        listeners.push(state);
    }
    let result = step_pipelined(model, &mut streams, most_steps, |index, event| listeners[index].relay(event));
    match result {
        Ok(groups) => {
            for chat in decoding {
                chat.state.groups_in_flight = chat.state.groups_in_flight.max(groups);
            }
            Ok(())
        }
        Err(error) => match error.downcast::<WorkerLost>() {
            Ok(lost) => Err(lost),
            Err(error) => {
                let message = format!("{error:#}");
                for chat in decoding {
                    chat.failed = Some(EngineEvent::error(ErrorKind::Failed, message.clone()));
                }
                Ok(())
            }
        },
    }
}
