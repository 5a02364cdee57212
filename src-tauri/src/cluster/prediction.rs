//! What a plan will give before anything is loaded: its decode speed, its
//! time to first token and what limits each, from every machine's measured
//! speeds and every link's measured round trip and bandwidth. And the
//! choice between plans: this machine alone (when the model fits), all
//! machines, and the best subset, the fastest picked with its reason.
//!
//! The model of a decode step: each stage streams its weights at its
//! machine's decode speed and pays its machine's fixed cost per layer, one
//! stage after another, and the hidden states cross the links: there and
//! back for each worker when they return to this machine after each, once
//! into each worker and once back when they go worker to worker (a link
//! between two workers, which this machine cannot measure, is taken to be
//! like the second one's link to this machine). A prompt runs each stage
//! at its machine's prompt speed, in pieces of [`PREFILL_CHUNK`] tokens,
//! each piece crossing the links as a step does.

use super::assignment::{plan, NodeCapacity, Plan};
use super::protocol::HiddenRoute;
use crate::models::context::PREFILL_CHUNK;
use crate::models::memory_needs::MemoryNeeds;
use serde::Serialize;

/// Workers beyond this many are not tried in every subset (2ⁿ plans):
/// only all of them and this machine alone are compared.
const MAX_SUBSET_WORKERS: usize = 8;

/// Bytes a hop adds to a message's hidden states: the request's header,
/// the frame's length and the AEAD tag (measured: about 120).
const FRAME_OVERHEAD_BYTES: u64 = 160;

/// A link from this machine to a worker, as measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkSpeed {
    pub round_trip_seconds: f64,
    pub bytes_per_second: f64,
}

impl LinkSpeed {
    /// Seconds a hop takes that carries `bytes` there and `bytes` back.
    pub fn hop_seconds(&self, bytes: u64) -> f64 {
        2.0 * self.one_way_seconds(bytes)
    }

    /// Seconds a message of `bytes` takes one way.
    pub fn one_way_seconds(&self, bytes: u64) -> f64 {
        self.round_trip_seconds / 2.0 + (bytes + FRAME_OVERHEAD_BYTES) as f64 / self.bytes_per_second
    }
}

/// Seconds `bytes` of hidden states spend on the links of the workers
/// (in pipeline order) per step, going `route`.
fn crossing_seconds(links: &[LinkSpeed], bytes: u64, route: HiddenRoute) -> f64 {
    match route {
        HiddenRoute::ThroughMaster => links.iter().map(|l| l.hop_seconds(bytes)).sum(),
        HiddenRoute::WorkerToWorker => {
            links.iter().map(|l| l.one_way_seconds(bytes)).sum::<f64>()
                + links.last().map_or(0.0, |l| l.one_way_seconds(bytes))
        }
    }
}

/// A machine the preview may use: what the planner needs, its prompt
/// speed, and (for a worker) its link.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub capacity: NodeCapacity,
    /// Weight bytes × tokens per second while reading a prompt.
    pub prompt_bytes_per_second: f64,
    /// Seconds each of its layers costs a step beyond its weights.
    pub layer_overhead_seconds: f64,
    /// `None` for this machine.
    pub link: Option<LinkSpeed>,
}

/// What bounds a prediction most.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Limit {
    /// Streaming weights from memory (decode) on this machine.
    Memory { machine: String, seconds: f64 },
    /// Arithmetic (a prompt) on this machine.
    Compute { machine: String, seconds: f64 },
    /// Round trips and transfer over the links.
    Link { seconds: f64 },
}

impl Limit {
    fn seconds(&self) -> f64 {
        match self {
            Limit::Memory { seconds, .. } | Limit::Compute { seconds, .. } | Limit::Link { seconds } => *seconds,
        }
    }

    fn describe(&self) -> String {
        match self {
            Limit::Memory { machine, seconds } => format!("{machine}'s memory ({:.1} ms)", seconds * 1e3),
            Limit::Compute { machine, seconds } => format!("{machine}'s compute ({:.1} ms)", seconds * 1e3),
            Limit::Link { seconds } => format!("the links ({:.1} ms)", seconds * 1e3),
        }
    }
}

/// What a plan is predicted to give one conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    pub decode_tokens_per_second: f64,
    /// Seconds of a decode step spent on the links.
    pub link_seconds_per_token: f64,
    pub decode_limit: Limit,
    /// Tokens of the prompt the time to first token is for.
    pub prompt_tokens: usize,
    pub first_token_seconds: f64,
    pub prompt_limit: Limit,
}

/// Predicts `plan` (its stages on `machines`, in the same order) for a
/// prompt of `prompt_tokens`, with `hidden_bytes` per token on the wire
/// going `route`.
pub fn predict(
    plan: &Plan,
    machines: &[Machine],
    hidden_bytes: u64,
    route: HiddenRoute,
    prompt_tokens: usize,
) -> Prediction {
    let mut decode_parts: Vec<Limit> = Vec::new();
    let mut prompt_parts: Vec<Limit> = Vec::new();
    let mut links = Vec::new();
    let pieces = prompt_tokens.div_ceil(PREFILL_CHUNK).max(1);
    for (stage, machine) in plan.stages.iter().zip(machines) {
        if stage.layers.is_empty() && machine.link.is_some() {
            continue;
        }
        let name = stage.node.clone();
        // The CPU's part and, where it has one, the GPU's part of the stage.
        let cpu_bytes = stage.read_bytes.saturating_sub(stage.gpu_read_bytes) as f64;
        let cpu_overhead = (stage.layers.len() - stage.gpu_layers.len()) as f64 * machine.layer_overhead_seconds;
        let (mut decode, mut prompt) = (
            cpu_bytes / machine.capacity.bytes_per_second + cpu_overhead,
            cpu_bytes * prompt_tokens as f64 / machine.prompt_bytes_per_second + pieces as f64 * cpu_overhead,
        );
        if let Some(gpu) = &machine.capacity.gpu {
            let (bytes, overhead) =
                (stage.gpu_read_bytes as f64, stage.gpu_layers.len() as f64 * gpu.layer_overhead_seconds);
            decode += bytes / gpu.bytes_per_second + overhead;
            prompt += bytes * prompt_tokens as f64 / gpu.prompt_bytes_per_second + pieces as f64 * overhead;
        }
        decode_parts.push(Limit::Memory { machine: name.clone(), seconds: decode });
        prompt_parts.push(Limit::Compute { machine: name, seconds: prompt });
        links.extend(machine.link);
    }
    let decode_link = crossing_seconds(&links, hidden_bytes, route);
    let piece_tokens = prompt_tokens.div_ceil(pieces) as u64;
    let prompt_link = pieces as f64 * crossing_seconds(&links, hidden_bytes * piece_tokens, route);
    let total = |parts: &[Limit], link: f64| parts.iter().map(Limit::seconds).sum::<f64>() + link;
    let (decode_seconds, prompt_seconds) = (total(&decode_parts, decode_link), total(&prompt_parts, prompt_link));
    decode_parts.push(Limit::Link { seconds: decode_link });
    prompt_parts.push(Limit::Link { seconds: prompt_link });
    let largest = |parts: Vec<Limit>| {
        parts.into_iter().max_by(|a, b| a.seconds().total_cmp(&b.seconds())).expect("the link is always a part")
    };
    Prediction {
        decode_tokens_per_second: 1.0 / decode_seconds.max(1e-12),
        link_seconds_per_token: decode_link,
        decode_limit: largest(decode_parts),
        prompt_tokens,
        first_token_seconds: prompt_seconds,
        prompt_limit: largest(prompt_parts),
    }
}

/// One plan the preview compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanOption {
    /// "this machine alone", "all 3 machines", or the machines it uses.
    pub label: String,
    pub machines: Vec<String>,
    /// The plan and its prediction, or why it cannot run.
    pub plan: Option<Plan>,
    pub prediction: Option<Prediction>,
    pub refused: Option<String>,
}

/// The plans compared, the one picked and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preview {
    pub options: Vec<PlanOption>,
    /// Index into `options` of the fastest plan that runs, if any runs.
    pub chosen: Option<usize>,
    pub reason: String,
}

/// Compares this machine alone, all machines and the best subset of
/// `machines` (`machines[0]` is this machine) for a model with `needs`.
pub fn preview(
    needs: &MemoryNeeds,
    machines: &[Machine],
    hidden_bytes: u64,
    route: HiddenRoute,
    prompt_tokens: usize,
) -> Preview {
    assert!(machines.first().is_some_and(|m| m.link.is_none()), "this machine comes first");
    let evaluate = |label: String, members: &[usize]| {
        let chosen: Vec<Machine> = members.iter().map(|&i| machines[i].clone()).collect();
        let capacities: Vec<NodeCapacity> = chosen.iter().map(|c| c.capacity.clone()).collect();
        let names = capacities.iter().map(|c| c.name.clone()).collect();
        match plan(needs, &capacities) {
            Ok(plan) => {
                let prediction = predict(&plan, &chosen, hidden_bytes, route, prompt_tokens);
                PlanOption { label, machines: names, plan: Some(plan), prediction: Some(prediction), refused: None }
            }
            Err(e) => {
                PlanOption { label, machines: names, plan: None, prediction: None, refused: Some(format!("{e:#}")) }
            }
        }
    };
    let workers = machines.len() - 1;
    let mut options = vec![evaluate("this machine alone".into(), &[0])];
    if workers > 0 {
        let all: Vec<usize> = (0..machines.len()).collect();
        options.push(evaluate(format!("all {} machines", machines.len()), &all));
    }
    if (2..=MAX_SUBSET_WORKERS).contains(&workers) {
        // Every proper subset with at least one worker; the fastest is kept.
        let best = (1..(1u32 << workers) - 1)
            .map(|mask| {
                let members: Vec<usize> =
                    std::iter::once(0).chain((0..workers).filter(|w| mask >> w & 1 == 1).map(|w| w + 1)).collect();
                let names: Vec<&str> = members.iter().map(|&i| machines[i].capacity.name.as_str()).collect();
                evaluate(names.join(" + "), &members)
            })
            .filter(|o| o.prediction.is_some())
            .max_by(|a, b| speed(a).total_cmp(&speed(b)));
        options.extend(best);
    }
    let chosen = (0..options.len()).filter(|&i| options[i].prediction.is_some()).max_by(|&a, &b| {
        // The faster; between equals, the earlier (fewer machines).
        speed(&options[a]).total_cmp(&speed(&options[b])).then(b.cmp(&a))
    });
    let reason = reason(&options, chosen);
    Preview { options, chosen, reason }
}

fn speed(option: &PlanOption) -> f64 {
    option.prediction.as_ref().map_or(0.0, |p| p.decode_tokens_per_second)
}

/// Why `chosen` was picked, in a sentence.
fn reason(options: &[PlanOption], chosen: Option<usize>) -> String {
    let Some(chosen) = chosen else {
        let why = options.iter().filter_map(|o| o.refused.as_deref()).next().unwrap_or("no machines");
        return format!("no plan fits: {why}");
    };
    let pick = &options[chosen];
    let prediction = pick.prediction.as_ref().expect("a chosen plan has a prediction");
    let others = options
        .iter()
        .enumerate()
        .filter(|&(i, o)| i != chosen && o.prediction.is_some())
        .map(|(_, o)| format!("{} {:.1} tok/s", o.label, speed(o)))
        .collect::<Vec<_>>();
    let versus = if others.is_empty() { String::new() } else { format!(" (against {})", others.join(", ")) };
    if pick.machines.len() == 1 && options.len() > 1 {
        let links = options.iter().filter_map(|o| o.prediction.as_ref()).map(|p| p.link_seconds_per_token);
        let link = links.fold(0.0, f64::max);
        format!(
            "one machine is faster here: {:.1} tok/s{versus}; the links would cost {:.2} ms per token",
            speed(pick),
            link * 1e3
        )
    } else {
        let limit = prediction.decode_limit.describe();
        format!("{}: {:.1} tok/s{versus}, limited by {limit}", pick.label, speed(pick))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::assignment::GpuCapacity;

    fn needs(layers: usize, layer_bytes: u64) -> MemoryNeeds {
        MemoryNeeds {
            context_length: 1024,
            layer_weights: vec![layer_bytes; layers],
            layer_kv: vec![1_000_000; layers],
            other_weights: layer_bytes,
            layer_reads: vec![layer_bytes; layers],
            other_reads: layer_bytes,
            layer_gpu_vram: vec![None; layers],
            activations: 10_000_000,
            safety_margin: 0.05,
        }
    }

    fn machine(name: &str, memory: u64, speed: f64, link: Option<LinkSpeed>) -> Machine {
        Machine {
            capacity: NodeCapacity { name: name.into(), memory_bytes: memory, bytes_per_second: speed, gpu: None },
            prompt_bytes_per_second: speed * 30.0,
            layer_overhead_seconds: 0.0,
            link,
        }
    }

    const GIGABIT: LinkSpeed = LinkSpeed { round_trip_seconds: 0.3e-3, bytes_per_second: 125e6 };

    /// Predicted decode time is the stages' streaming, each layer's fixed
    /// cost and one hop per worker, computed by hand here.
    #[test]
    fn decode_time_adds_streaming_layer_costs_and_hops() {
        let needs = needs(10, 100_000_000);
        let mut machines = [machine("me", 1 << 40, 10e9, None), machine("a", 1 << 40, 10e9, Some(GIGABIT))];
        machines[1].layer_overhead_seconds = 50e-6;
        let plan = plan(&needs, &machines.iter().map(|m| m.capacity.clone()).collect::<Vec<_>>()).unwrap();
        let prediction = predict(&plan, &machines, 4 * 2048, HiddenRoute::ThroughMaster, 100);
        let streaming: f64 =
            plan.stages.iter().map(|s| s.bytes as f64 / 10e9).sum::<f64>() + plan.stages[1].layers.len() as f64 * 50e-6;
        let hop = 0.3e-3 + 2.0 * (4.0 * 2048.0 + FRAME_OVERHEAD_BYTES as f64) / 125e6;
        assert!((1.0 / prediction.decode_tokens_per_second - (streaming + hop)).abs() < 1e-9);
        assert!((prediction.link_seconds_per_token - hop).abs() < 1e-12);
        assert!(matches!(prediction.decode_limit, Limit::Memory { .. }), "{prediction:?}");
    }

    /// A machine with a GPU: the layers on it stream at the GPU's speed
    /// and pay its fixed cost per layer, the rest the CPU's.
    #[test]
    fn layers_on_a_gpu_are_predicted_at_its_speed() {
        let mut needs = needs(10, 100_000_000);
        needs.layer_gpu_vram = vec![Some(200_000_000); 10];
        let mut me = machine("me", 1 << 40, 10e9, None);
        me.layer_overhead_seconds = 50e-6;
        me.capacity.gpu = Some(GpuCapacity {
            memory_bytes: Some(600_000_000),
            max_layers: None,
            bytes_per_second: 500e9,
            prompt_bytes_per_second: 5000e9,
            layer_overhead_seconds: 20e-6,
        });
        let plan = plan(&needs, std::slice::from_ref(&me.capacity)).unwrap();
        assert_eq!(plan.stages[0].gpu_layers, vec![0, 1, 2]);
        let prediction = predict(&plan, std::slice::from_ref(&me), 0, HiddenRoute::ThroughMaster, 100);
        let cpu = (7.0 + 1.0) * 100e6 / 10e9 + 7.0 * 50e-6;
        let gpu = 3.0 * 100e6 / 500e9 + 3.0 * 20e-6;
        assert!((1.0 / prediction.decode_tokens_per_second - (cpu + gpu)).abs() < 1e-9, "{prediction:?}");
        let prompt = 8.0 * 100e6 * 100.0 / 300e9 + 7.0 * 50e-6 + 3.0 * 100e6 * 100.0 / 5000e9 + 3.0 * 20e-6;
        assert!((prediction.first_token_seconds - prompt).abs() < 1e-9, "{prediction:?}");
    }

    /// Worker to worker, a step crosses into each worker once and back
    /// once; through this machine, there and back for each worker.
    #[test]
    fn worker_to_worker_crosses_one_link_per_worker_and_one_back() {
        let needs = needs(12, 100_000_000);
        let wifi = LinkSpeed { round_trip_seconds: 3e-3, bytes_per_second: 37.5e6 };
        let machines = [
            machine("me", 1 << 40, 10e9, None),
            machine("a", 1 << 40, 10e9, Some(GIGABIT)),
            machine("b", 1 << 40, 10e9, Some(wifi)),
        ];
        let capacities: Vec<_> = machines.iter().map(|m| m.capacity.clone()).collect();
        let plan = plan(&needs, &capacities).unwrap();
        assert!(plan.stages.iter().all(|s| !s.layers.is_empty()), "{plan:?}");
        let link = |route| predict(&plan, &machines, 4 * 2048, route, 1).link_seconds_per_token;
        let through = GIGABIT.hop_seconds(4 * 2048) + wifi.hop_seconds(4 * 2048);
        let hops = GIGABIT.one_way_seconds(4 * 2048) + 2.0 * wifi.one_way_seconds(4 * 2048);
        assert!((link(HiddenRoute::ThroughMaster) - through).abs() < 1e-12);
        assert!((link(HiddenRoute::WorkerToWorker) - hops).abs() < 1e-12);
    }

    /// A model that fits here runs here alone when the link costs more
    /// than the second machine's memory bandwidth saves.
    #[test]
    fn a_slow_link_keeps_a_small_model_on_one_machine() {
        let needs = needs(30, 3_000_000);
        let wifi = LinkSpeed { round_trip_seconds: 3e-3, bytes_per_second: 37.5e6 };
        let machines = [machine("me", 1 << 40, 10e9, None), machine("a", 1 << 40, 10e9, Some(wifi))];
        let preview = preview(&needs, &machines, 4 * 576, HiddenRoute::WorkerToWorker, 100);
        let chosen = &preview.options[preview.chosen.unwrap()];
        assert_eq!(chosen.label, "this machine alone", "{preview:#?}");
        assert!(preview.reason.starts_with("one machine is faster here"), "{}", preview.reason);
    }

    /// A model that does not fit here is refused alone and runs over the
    /// machines (stages run one after another, so between equal machines
    /// more of them win only by fitting the model).
    #[test]
    fn a_model_too_big_for_one_machine_is_refused_alone_and_split() {
        let needs = needs(16, 100_000_000);
        let machines = [
            machine("me", 1_000_000_000, 10e9, None),
            machine("a", 1_000_000_000, 10e9, Some(GIGABIT)),
            machine("b", 1_000_000_000, 10e9, Some(GIGABIT)),
        ];
        let preview = preview(&needs, &machines, 4 * 2048, HiddenRoute::WorkerToWorker, 100);
        assert!(preview.options[0].refused.as_deref().unwrap().contains("missing"), "{preview:#?}");
        let chosen = &preview.options[preview.chosen.unwrap()];
        assert!(chosen.machines.len() >= 2, "{preview:#?}");
        assert_eq!(preview.options.len(), 3, "alone, all, best subset");
    }

    /// A faster worker takes more of the layers, and the preview prefers
    /// using it when its bandwidth gain outweighs the hop.
    #[test]
    fn a_much_faster_worker_is_used_over_a_fast_link() {
        let needs = needs(16, 100_000_000);
        let machines = [machine("me", 1 << 40, 2e9, None), machine("fast", 1 << 40, 40e9, Some(GIGABIT))];
        let preview = preview(&needs, &machines, 4 * 2048, HiddenRoute::WorkerToWorker, 100);
        let chosen = &preview.options[preview.chosen.unwrap()];
        assert_eq!(chosen.label, "all 2 machines", "{preview:#?}");
        assert!(preview.reason.contains("tok/s"), "{}", preview.reason);
    }

    /// A long prompt over a slow link is limited by the link's transfer.
    #[test]
    fn time_to_first_token_counts_each_prompt_piece_over_the_link() {
        let needs = needs(4, 1_000_000);
        let slow = LinkSpeed { round_trip_seconds: 1e-3, bytes_per_second: 1e6 };
        let machines = [machine("me", 1 << 40, 10e9, None), machine("a", 1 << 40, 10e9, Some(slow))];
        let plan = plan(&needs, &machines.iter().map(|m| m.capacity.clone()).collect::<Vec<_>>()).unwrap();
        let prediction = predict(&plan, &machines, 4 * 2048, HiddenRoute::ThroughMaster, 2048);
        assert!(matches!(prediction.prompt_limit, Limit::Link { .. }), "{prediction:?}");
        let pieces = 2048usize.div_ceil(PREFILL_CHUNK) as f64;
        let link_alone = pieces * slow.hop_seconds(4 * 2048 * PREFILL_CHUNK as u64);
        assert!(prediction.first_token_seconds > link_alone, "{prediction:?}");
    }
}
