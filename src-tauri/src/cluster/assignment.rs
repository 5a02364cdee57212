//! Deciding which node runs which layers.
//!
//! Every node (the master first, then the workers in pipeline order) gets
//! one contiguous range of layers, possibly empty. A range costs the memory
//! its layers need at full context ([`MemoryNeeds::machine_bytes`]: weights,
//! KV cache, working memory, margin) and `weight bytes / speed` seconds per
//! token, so the plan that minimises the slowest stage under every node's
//! memory limit is found by dynamic programming over (node, first layer).
//! The master also keeps the embedding and the LM head, and always runs the
//! first layer itself: raw token embeddings (from which the prompt can be
//! read back) never leave it; workers see only hidden states.
//!
//! A node with a GPU runs the first layers of its range that its GPU can
//! run and hold there (the rule its load follows, [`GpuFill`]), at the
//! GPU's measured speed; the rest of its range takes RAM and CPU time.

use crate::models::gpu_offload::{FillOutcome, GpuFill};
use crate::models::memory_needs::MemoryNeeds;
use crate::models::sources::selection::layer_ranges;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// What the planner knows about one machine.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCapacity {
    pub name: String,
    /// Bytes of memory the node can give the model: weights, caches and
    /// working memory together.
    pub memory_bytes: u64,
    /// Weight bytes the node processes per second (measured or estimated).
    pub bytes_per_second: f64,
    /// The GPU its layers run on first, if it uses one.
    pub gpu: Option<GpuCapacity>,
}

/// A machine's GPU as the planner sees it, measured by that machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuCapacity {
    /// VRAM it may fill with layers (free, less a spare share, or what the
    /// user capped it at); `None` where the driver does not tell: no cap.
    pub memory_bytes: Option<u64>,
    /// At most this many layers (`--gpu-layers`); `None`: all that fit.
    pub max_layers: Option<usize>,
    /// Weight bytes a decode step multiplies per second on it.
    pub bytes_per_second: f64,
    /// Weight bytes × tokens per second while reading a prompt.
    pub prompt_bytes_per_second: f64,
    /// Seconds a layer costs on it beyond its weights (kernel launches,
    /// attention, norms).
    pub layer_overhead_seconds: f64,
}

impl GpuCapacity {
    /// The same GPU `fraction` (above 0, at most 1) as fast: what a master
    /// believes of a machine that ran slower than it claimed.
    pub fn slowed(&self, fraction: f64) -> Self {
        Self {
            bytes_per_second: self.bytes_per_second * fraction,
            prompt_bytes_per_second: self.prompt_bytes_per_second * fraction,
            layer_overhead_seconds: self.layer_overhead_seconds / fraction,
            ..self.clone()
        }
    }
}

/// One node's share of the model, with the reason it got it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageAssignment {
    pub node: String,
    pub layers: Range<usize>,
    /// Weight bytes of its layers (plus embedding and head on the master).
    pub bytes: u64,
    /// What its decode step reads, in bytes of Q8_0 that take as long
    /// (see [`MemoryNeeds::layer_reads`]).
    pub read_bytes: u64,
    /// Bytes its layers' KV caches take at full context.
    pub kv_bytes: u64,
    /// All the RAM planned for it: weights, caches, working memory and margin
    /// (of the layers its CPU runs).
    pub memory_bytes: u64,
    /// The layers its GPU runs (the first it can run and hold).
    pub gpu_layers: Vec<usize>,
    /// VRAM planned for them (weights and caches).
    pub gpu_memory_bytes: u64,
    /// The part of `read_bytes` its GPU reads.
    pub gpu_read_bytes: u64,
    /// Estimated seconds per token for its layers.
    pub seconds_per_token: f64,
    pub reason: String,
}

/// A plan for the whole cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub stages: Vec<StageAssignment>,
    /// The slowest stage's seconds per token.
    pub bottleneck_seconds: f64,
    /// Tokens a conversation may hold: what the caches are planned for.
    pub context_length: usize,
}

/// `bytes` for messages: in GB, or in MB below one GB (a small model's
/// layers would all read "0.00 GB").
fn amount(bytes: u64) -> String {
    if bytes >= 1_000_000_000 {
        format!("{:.2} GB", bytes as f64 / 1e9)
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

impl MemoryNeeds {
    /// What the needs say, part by part, for messages.
    fn described(&self) -> String {
        format!(
            "weights {}, KV cache for {} tokens {}, working memory {} per machine",
            amount(self.weights(0..self.layer_weights.len()) + self.other_weights),
            self.context_length,
            amount(self.kv(0..self.layer_kv.len())),
            amount(self.activations)
        )
    }

    /// The needs of layers `range` alone (renumbered from 0).
    fn restricted(&self, range: Range<usize>) -> Self {
        Self {
            layer_weights: self.layer_weights[range.clone()].to_vec(),
            layer_reads: self.layer_reads[range.clone()].to_vec(),
            layer_kv: self.layer_kv[range.clone()].to_vec(),
            layer_gpu_vram: self.layer_gpu_vram[range].to_vec(),
            ..self.clone()
        }
    }
}

/// How a node runs a range of layers: which of them its GPU takes and
/// what that leaves for its RAM and CPU.
struct Split {
    gpu_layers: Vec<usize>,
    gpu_memory: u64,
    gpu_reads: u64,
    /// RAM for the layers its CPU runs (see [`MemoryNeeds::machine_bytes`]).
    ram: u64,
    /// Estimated seconds per token for the range.
    seconds: f64,
}

/// `node` (the master when `master`) running `layers`: its GPU, if any,
/// takes layers by [`GpuFill`]'s rule, as the node's load will.
fn split(needs: &MemoryNeeds, node: &NodeCapacity, layers: Range<usize>, master: bool) -> Split {
    let mut on_gpu = vec![false; layers.len()];
    let (mut gpu_memory, mut gpu_reads, mut gpu_seconds) = (0, 0, 0.0);
    if let Some(gpu) = &node.gpu {
        let mut fill = GpuFill::new(gpu.max_layers, gpu.memory_bytes);
        for (slot, layer) in on_gpu.iter_mut().zip(layers.clone()) {
            let Some(vram) = needs.layer_gpu_vram[layer] else { continue };
            if fill.offer(vram) == FillOutcome::Taken {
                *slot = true;
                gpu_memory += vram;
                gpu_reads += needs.layer_reads[layer];
                gpu_seconds += needs.layer_reads[layer] as f64 / gpu.bytes_per_second + gpu.layer_overhead_seconds;
            }
        }
    }
    let gpu_layers: Vec<usize> = layers.clone().zip(&on_gpu).filter(|(_, &on)| on).map(|(l, _)| l).collect();
    let cpu_layers = layers.clone().zip(&on_gpu).filter(|(_, &on)| !on).map(|(l, _)| l);
    let ram = if layers.is_empty() && !master { 0 } else { needs.ram_bytes(cpu_layers, master) };
    let cpu_reads = needs.reads(layers) - gpu_reads;
    Split { gpu_layers, gpu_memory, gpu_reads, ram, seconds: cpu_reads as f64 / node.bytes_per_second + gpu_seconds }
}

/// The stage of `node` (the master when `master`) running `layers`.
fn stage(
    needs: &MemoryNeeds,
    node: &NodeCapacity,
    layers: Range<usize>,
    master: bool,
    reason: String,
) -> StageAssignment {
    let reads = needs.reads(layers.clone());
    let split = split(needs, node, layers.clone(), master);
    StageAssignment {
        node: node.name.clone(),
        bytes: needs.weights(layers.clone()) + if master { needs.other_weights } else { 0 },
        read_bytes: reads + if master { needs.other_reads } else { 0 },
        kv_bytes: needs.kv(layers.clone()),
        memory_bytes: split.ram,
        gpu_layers: split.gpu_layers,
        gpu_memory_bytes: split.gpu_memory,
        gpu_read_bytes: split.gpu_reads,
        seconds_per_token: split.seconds,
        layers,
        reason,
    }
}

/// Plans the layers of a model with `needs` over `nodes`; `nodes[0]` is the
/// master and also holds the embedding and head.
pub fn plan(needs: &MemoryNeeds, nodes: &[NodeCapacity]) -> Result<Plan> {
    check_capacity(needs, nodes)?;
    let (bottleneck, ends) = best_split(needs, nodes)?;
    let mut stages = Vec::with_capacity(nodes.len());
    let mut start = 0;
    for (k, (node, &end)) in nodes.iter().zip(&ends).enumerate() {
        let next = (end < needs.layer_weights.len()).then(|| split(needs, node, start..end + 1, k == 0).ram);
        let reason = stage_reason(needs, node, start..end, k == 0, next);
        stages.push(stage(needs, node, start..end, k == 0, reason));
        start = end;
    }
    Ok(Plan { stages, bottleneck_seconds: bottleneck, context_length: needs.context_length })
}

/// Refuses plans that cannot work before searching: no machines, an
/// unusable speed, too little memory overall or on the master.
fn check_capacity(needs: &MemoryNeeds, nodes: &[NodeCapacity]) -> Result<()> {
    if nodes.is_empty() {
        bail!("no machines to run the model on");
    }
    if let Some(n) = nodes.iter().find(|n| n.bytes_per_second.is_nan() || n.bytes_per_second <= 0.0) {
        bail!("{} reports no usable speed", n.name);
    }
    // Saturating: memory is what each machine reports about itself.
    let layers = needs.layer_weights.len();
    let needed = needs.machine_bytes(0..layers, true);
    // A GPU's VRAM holds layers too (without a figure: as much as needed).
    let vram = |n: &NodeCapacity| n.gpu.as_ref().map_or(0, |g| g.memory_bytes.unwrap_or(u64::MAX));
    let available: u64 = nodes.iter().fold(0u64, |sum, n| sum.saturating_add(n.memory_bytes).saturating_add(vram(n)));
    if needed > available {
        bail!(
            "the model needs at least {} ({}) but the {} machine(s) have {} available: {} missing",
            amount(needed),
            needs.described(),
            nodes.len(),
            amount(available),
            amount(needed - available)
        );
    }
    let master_minimum = split(needs, &nodes[0], 0..layers.min(1), true).ram;
    if master_minimum > nodes[0].memory_bytes {
        bail!(
            "{} must hold the embedding, the LM head and the first layer with its KV cache for {} tokens ({}) \
             but has only {} available",
            nodes[0].name,
            needs.context_length,
            amount(master_minimum),
            amount(nodes[0].memory_bytes)
        );
    }
    Ok(())
}

/// The split with the smallest slowest stage, by dynamic programming:
/// returns that stage's seconds per token and where each node's range ends.
fn best_split(needs: &MemoryNeeds, nodes: &[NodeCapacity]) -> Result<(f64, Vec<usize>)> {
    // best[k][i]: the smallest bottleneck for layers i.. on nodes k..; choice[k][i]: where node k's range ends.
    let layers = needs.layer_weights.len();
    let n = nodes.len();
    let mut best = vec![vec![f64::INFINITY; layers + 1]; n + 1];
    let mut choice = vec![vec![0usize; layers + 1]; n + 1];
    best[n][layers] = 0.0;
    for k in (0..n).rev() {
        let node = &nodes[k];
        // The master's range is never empty: it keeps the first layer.
        let shortest = usize::from(k == 0 && layers > 0);
        for i in 0..=layers {
            for end in (i + shortest).min(layers)..=layers {
                // RAM only grows with the range: layers past the GPU's go to the CPU.
                let split = split(needs, node, i..end, k == 0);
                if split.ram > node.memory_bytes {
                    break;
                }
                let total = split.seconds.max(best[k + 1][end]);
                if total < best[k][i] {
                    best[k][i] = total;
                    choice[k][i] = end;
                }
            }
        }
    }
    if !best[0][0].is_finite() {
        bail!(
            "the layers cannot be split into contiguous ranges that fit each machine's memory \
             ({}; the largest layer takes {} with its cache; machines offer {})",
            needs.described(),
            amount((0..layers).map(|l| needs.weights(l..l + 1) + needs.kv(l..l + 1)).max().unwrap_or(0)),
            nodes.iter().map(|n| format!("{} {}", n.name, amount(n.memory_bytes))).collect::<Vec<_>>().join(", ")
        );
    }
    let mut ends = Vec::with_capacity(n);
    let mut start = 0;
    for row in &choice[..n] {
        start = row[start].max(start);
        ends.push(start);
    }
    Ok((best[0][0], ends))
}

/// Why a node got `layers`: memory (`with_next`, the RAM one more layer
/// would take, is over its limit) or speed; and which its GPU runs.
fn stage_reason(
    needs: &MemoryNeeds,
    node: &NodeCapacity,
    layers: Range<usize>,
    master: bool,
    with_next: Option<u64>,
) -> String {
    let count = layers.len();
    let split = split(needs, node, layers.clone(), master);
    let kv = needs.kv(layers.clone());
    let memory = needs.machine_bytes(layers.clone(), master);
    let share = if count == 0 {
        return "no layers: the others are fast enough and have room".to_string();
    } else if with_next.is_some_and(|next| next > node.memory_bytes) {
        format!(
            "{count} layers ({} with a {} KV cache): as many as fit in its {} of memory",
            amount(memory),
            amount(kv),
            amount(node.memory_bytes)
        )
    } else {
        format!(
            "{count} layers ({} with a {} KV cache): a share matched to its speed ({:.1} GB/s), {:.1} ms per token",
            amount(memory),
            amount(kv),
            node.bytes_per_second / 1e9,
            split.seconds * 1e3
        )
    };
    match &node.gpu {
        Some(_) if split.gpu_layers.is_empty() => format!("{share}; none on its GPU"),
        Some(gpu) => format!(
            "{share}; layers {} on its GPU ({} of VRAM, {:.1} GB/s)",
            layer_ranges(&split.gpu_layers),
            amount(split.gpu_memory),
            gpu.bytes_per_second / 1e9
        ),
        None => share,
    }
}

/// A plan in which some workers must run fixed layers (from a topology
/// file); the master and the workers without fixed layers share the rest.
/// `nodes[0]` is the master and `fixed[i]` belongs to `nodes[i]`.
///
/// Returns the stages in pipeline order (the master first, then by first
/// layer; unused workers last) and, for each stage, the index of its node.
pub fn plan_with_fixed(
    needs: &MemoryNeeds,
    nodes: &[NodeCapacity],
    fixed: &[Option<Range<usize>>],
) -> Result<(Plan, Vec<usize>)> {
    assert_eq!(nodes.len(), fixed.len(), "one fixed entry per node");
    let layers = needs.layer_weights.len();
    if fixed.iter().all(Option::is_none) {
        return Ok((plan(needs, nodes)?, (0..nodes.len()).collect()));
    }
    let mut owner: Vec<Option<usize>> = vec![None; layers];
    for (index, range) in fixed.iter().enumerate() {
        let Some(range) = range else { continue };
        let node = &nodes[index];
        if range.end > layers {
            bail!("{}: layers {}-{} do not exist (the model has {layers})", node.name, range.start, range.end - 1);
        }
        for layer in range.clone() {
            if let Some(other) = owner[layer] {
                bail!("layer {layer} is given to both {} and {}", nodes[other].name, node.name);
            }
            owner[layer] = Some(index);
        }
        let bytes = split(needs, node, range.clone(), false).ram;
        if bytes > node.memory_bytes {
            bail!(
                "{} is given {} (layers, their KV cache for {} tokens, working memory) but has only {} available",
                node.name,
                amount(bytes),
                needs.context_length,
                amount(node.memory_bytes)
            );
        }
    }
    if let Some(Some(index)) = owner.first() {
        bail!(
            "the topology file gives layer 0 to {}: the first layer stays on the master, so raw token \
             embeddings never leave it",
            nodes[*index].name
        );
    }
    // The layers nobody was given must form one range, shared automatically.
    let free: Vec<usize> = (0..layers).filter(|&l| owner[l].is_none()).collect();
    let gap = match (free.first(), free.last()) {
        (Some(&a), Some(&b)) if b - a + 1 == free.len() => a..b + 1,
        (Some(_), Some(_)) => {
            bail!("the layers given to no machine ({}) are not one contiguous range", layer_ranges(&free))
        }
        _ => 0..0,
    };
    // Layer 0 is free (checked above), so the gap starts there and the master shares it.
    let auto: Vec<usize> = (0..nodes.len()).filter(|&i| i == 0 || fixed[i].is_none()).collect();
    let mut stages: Vec<(usize, StageAssignment)> = Vec::new();
    if !gap.is_empty() {
        let auto_nodes: Vec<NodeCapacity> = auto.iter().map(|&i| nodes[i].clone()).collect();
        let sub = plan(&needs.restricted(gap.clone()), &auto_nodes)?;
        for (&index, mut stage) in auto.iter().zip(sub.stages) {
            stage.layers = stage.layers.start + gap.start..stage.layers.end + gap.start;
            stages.push((index, stage));
        }
    }
    for (index, range) in fixed.iter().enumerate() {
        let Some(range) = range else { continue };
        let reason = format!("layers {}-{}, as the topology file says", range.start, range.end - 1);
        stages.push((index, stage(needs, &nodes[index], range.clone(), false, reason)));
    }
    // Pipeline order: the master, then by first layer; empty stages last.
    stages.sort_by_key(|(index, stage)| (*index != 0, stage.layers.is_empty(), stage.layers.start));
    let bottleneck = stages.iter().map(|(_, s)| s.seconds_per_token).fold(0.0, f64::max);
    let order = stages.iter().map(|(index, _)| *index).collect();
    let stages = stages.into_iter().map(|(_, s)| s).collect();
    Ok((Plan { stages, bottleneck_seconds: bottleneck, context_length: needs.context_length }, order))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Layers of `weights` bytes and nothing else, the master holding `master_extra` more.
    fn needs(weights: &[u64], master_extra: u64) -> MemoryNeeds {
        MemoryNeeds {
            context_length: 4096,
            layer_weights: weights.to_vec(),
            layer_kv: vec![0; weights.len()],
            other_weights: master_extra,
            layer_reads: weights.to_vec(),
            other_reads: master_extra,
            layer_gpu_vram: vec![None; weights.len()],
            activations: 0,
            safety_margin: 0.0,
        }
    }

    fn node(name: &str, memory: u64, speed: f64) -> NodeCapacity {
        NodeCapacity { name: name.into(), memory_bytes: memory, bytes_per_second: speed, gpu: None }
    }

    fn ranges(plan: &Plan) -> Vec<Range<usize>> {
        plan.stages.iter().map(|s| s.layers.clone()).collect()
    }

    #[test]
    fn equal_nodes_split_evenly_and_cover_every_layer() {
        let plan =
            plan(&needs(&[10; 12], 0), &[node("a", 1000, 1.0), node("b", 1000, 1.0), node("c", 1000, 1.0)]).unwrap();
        assert_eq!(ranges(&plan), vec![0..4, 4..8, 8..12]);
        assert_eq!(plan.bottleneck_seconds, 40.0);
    }

    #[test]
    fn a_faster_node_gets_more_layers() {
        let plan = plan(&needs(&[10; 12], 0), &[node("slow", 1000, 1.0), node("fast", 1000, 3.0)]).unwrap();
        assert_eq!(ranges(&plan), vec![0..3, 3..12]);
    }

    #[test]
    fn memory_limits_are_respected_and_explained() {
        let plan = plan(&needs(&[10; 12], 5), &[node("master", 25, 10.0), node("worker", 1000, 1.0)]).unwrap();
        assert_eq!(ranges(&plan), vec![0..2, 2..12]);
        assert!(plan.stages[0].reason.contains("as many as fit"), "{}", plan.stages[0].reason);
        assert!(plan.stages.iter().all(|s| s.bytes <= 1000));
    }

    #[test]
    fn a_model_too_big_says_how_much_memory_is_missing() {
        let err =
            plan(&needs(&[1_000_000_000; 10], 0), &[node("a", 4_000_000_000, 1.0), node("b", 4_000_000_000, 1.0)])
                .unwrap_err();
        let message = format!("{err:#}");
        assert!(message.contains("needs at least 10.00 GB") && message.contains("2.00 GB missing"), "{message}");
    }

    /// With their KV caches counted, layers take more room: caps that hold
    /// the weights alone re-split the layers, or refuse with what is missing.
    #[test]
    fn the_kv_cache_counts_against_each_machine() {
        let mut with_kv = needs(&[10; 12], 0);
        let nodes = [node("master", 60, 1.0), node("worker", 1000, 1.0)];
        assert_eq!(ranges(&plan(&with_kv, &nodes).unwrap()), vec![0..6, 6..12]);
        with_kv.layer_kv = vec![5; 12];
        let split = plan(&with_kv, &nodes).unwrap();
        assert_eq!(ranges(&split), vec![0..4, 4..12]);
        assert_eq!((split.stages[0].bytes, split.stages[0].kv_bytes, split.stages[0].memory_bytes), (40, 20, 60));
        assert!(split.stages[0].reason.contains("KV cache"), "{}", split.stages[0].reason);
        let err = format!("{:#}", plan(&with_kv, &[node("master", 60, 1.0), node("worker", 100, 1.0)]).unwrap_err());
        assert!(err.contains("KV cache for 4096 tokens") && err.contains("missing"), "{err}");
    }

    #[test]
    fn contiguity_that_cannot_fit_is_reported() {
        // Total memory suffices, but no single node can hold a 60-byte layer.
        let err = plan(&needs(&[10, 60], 0), &[node("a", 40, 1.0), node("b", 40, 1.0)]).unwrap_err();
        assert!(format!("{err:#}").contains("contiguous"), "{err:#}");
    }

    #[test]
    fn the_plan_is_optimal_on_small_cases() {
        // Brute force over all splits of 7 layers between 3 nodes (the master keeps layer 0).
        let layers = [5u64, 9, 2, 7, 3, 8, 4];
        let nodes = [node("a", 20, 2.0), node("b", 30, 1.0), node("c", 25, 1.5)];
        let plan = plan(&needs(&layers, 0), &nodes).unwrap();
        let mut best = f64::INFINITY;
        for i in 1..=7 {
            for j in i..=7 {
                let parts = [0..i, i..j, j..7];
                let ok = parts.iter().zip(&nodes).all(|(r, n)| layers[r.clone()].iter().sum::<u64>() <= n.memory_bytes);
                if ok {
                    let t = parts
                        .iter()
                        .zip(&nodes)
                        .map(|(r, n)| layers[r.clone()].iter().sum::<u64>() as f64 / n.bytes_per_second)
                        .fold(0.0, f64::max);
                    best = best.min(t);
                }
            }
        }
        assert!((plan.bottleneck_seconds - best).abs() < 1e-12, "{} vs {best}", plan.bottleneck_seconds);
    }
    /// A GPU of `memory` bytes (`None`: unknown) at `speed`, no fixed cost.
    fn gpu(memory: Option<u64>, speed: f64) -> Option<GpuCapacity> {
        Some(GpuCapacity {
            memory_bytes: memory,
            max_layers: None,
            bytes_per_second: speed,
            prompt_bytes_per_second: speed,
            layer_overhead_seconds: 0.0,
        })
    }

    /// A node's GPU takes the first layers of its range that it can run and
    /// hold (the load's rule): they cost VRAM instead of RAM and run at the
    /// GPU's speed, so a machine with a fast GPU gets more layers; a layer
    /// the GPU cannot run stays on the CPU without ending the fill.
    #[test]
    fn a_gpu_holds_the_first_layers_it_can_run_at_its_speed() {
        let mut layers = needs(&[10; 12], 0);
        layers.layer_gpu_vram = vec![Some(12); 12];
        layers.layer_gpu_vram[1] = None;
        // RAM for 4 layers, VRAM for 3 more (36 of 40), 9 times faster there.
        let master = NodeCapacity { gpu: gpu(Some(40), 9.0), ..node("master", 40, 1.0) };
        let plan = plan(&layers, &[master.clone(), node("worker", 1000, 1.0)]).unwrap();
        let stage = &plan.stages[0];
        assert_eq!(ranges(&plan), vec![0..7, 7..12]);
        assert_eq!(stage.gpu_layers, vec![0, 2, 3]);
        assert_eq!((stage.gpu_memory_bytes, stage.gpu_read_bytes, stage.memory_bytes), (36, 30, 40));
        assert!((stage.seconds_per_token - (40.0 + 30.0 / 9.0)).abs() < 1e-9, "{}", stage.seconds_per_token);
        assert!(stage.reason.contains("layers 0, 2-3 on its GPU"), "{}", stage.reason);
        // `--gpu-layers 1`: one layer on the GPU, the rest as RAM allows.
        let capped = NodeCapacity {
            gpu: gpu(Some(40), 9.0).map(|g| GpuCapacity { max_layers: Some(1), ..g }),
            ..master.clone()
        };
        let plan = super::plan(&layers, &[capped, node("worker", 1000, 1.0)]).unwrap();
        assert_eq!((ranges(&plan)[0].clone(), plan.stages[0].gpu_layers.clone()), (0..5, vec![0]));
        // Alone, its VRAM counts toward what the model needs.
        let err = format!("{:#}", super::plan(&layers, &[node("master", 40, 1.0)]).unwrap_err());
        assert!(err.contains("missing"), "{err}");
        let err = format!("{:#}", super::plan(&layers, std::slice::from_ref(&master)).unwrap_err());
        assert!(err.contains("missing"), "RAM and VRAM hold 7 of 12 layers: {err}");
        let ample = NodeCapacity { gpu: gpu(Some(1000), 9.0), ..master };
        assert_eq!(super::plan(&layers, &[ample]).unwrap().stages[0].gpu_layers.len(), 11);
        let roomy = NodeCapacity { gpu: gpu(None, 9.0), ..node("master", 40, 1.0) };
        let alone = super::plan(&layers, &[roomy]).unwrap();
        assert_eq!(alone.stages[0].gpu_layers.len(), 11, "a GPU without a memory figure takes every layer it runs");
    }

    #[test]
    fn claims_of_endless_memory_do_not_overflow_the_plan() {
        let nodes = [node("master", 1000, 1.0), node("boaster", u64::MAX, 1.0), node("other", u64::MAX, 1.0)];
        let plan = plan(&needs(&[10; 8], 5), &nodes).unwrap();
        assert_eq!(ranges(&plan).last().unwrap().end, 8);
    }

    #[test]
    fn fixed_layers_are_kept_and_the_rest_is_shared() {
        let nodes = [node("master", 1000, 1.0), node("fixed", 1000, 1.0), node("free", 1000, 1.0)];
        let (plan, order) = plan_with_fixed(&needs(&[10; 12], 0), &nodes, &[None, Some(8..12), None]).unwrap();
        assert_eq!(ranges(&plan), vec![0..4, 4..8, 8..12]);
        assert_eq!(order, vec![0, 2, 1]);
        assert!(plan.stages[2].reason.contains("topology"), "{}", plan.stages[2].reason);
    }

    #[test]
    fn the_master_keeps_the_first_layer_however_fast_the_workers_are() {
        let nodes = [node("master", 1000, 0.001), node("fast", 1000, 1e12)];
        let plan = plan(&needs(&[10; 4], 5), &nodes).unwrap();
        assert_eq!(ranges(&plan), vec![0..1, 1..4]);
        let err = format!(
            "{:#}",
            super::plan(&needs(&[10; 4], 5), &[node("master", 14, 1.0), node("big", 1000, 1.0)]).unwrap_err()
        );
        assert!(err.contains("the first layer"), "{err}");
    }

    #[test]
    fn a_topology_giving_layer_zero_to_a_worker_is_refused() {
        let nodes = [node("master", 1000, 1.0), node("first", 1000, 1.0), node("free", 1000, 1.0)];
        let err = format!("{:#}", plan_with_fixed(&needs(&[10; 6], 5), &nodes, &[None, Some(0..2), None]).unwrap_err());
        assert!(err.contains("gives layer 0 to first") && err.contains("stays on the master"), "{err}");
    }

    #[test]
    fn bad_fixed_layouts_are_refused_clearly() {
        let nodes = [node("master", 1000, 1.0), node("a", 1000, 1.0), node("b", 25, 1.0)];
        for (fixed, expected) in [
            (vec![None, Some(1..3), Some(2..4)], "given to both"),
            (vec![None, Some(1..3), Some(4..5)], "not one contiguous range"),
            (vec![None, Some(1..2), Some(10..13)], "do not exist"),
            (vec![None, Some(1..2), Some(2..6)], "has only"),
        ] {
            let err = format!("{:#}", plan_with_fixed(&needs(&[10; 12], 0), &nodes, &fixed).unwrap_err());
            assert!(err.contains(expected), "{fixed:?}: {err}");
        }
    }
}
