//! Deciding which node runs which layers.
//!
//! Every node (the master first, then the workers in pipeline order) gets
//! one contiguous range of layers, possibly empty. A layer costs its bytes
//! in memory and `bytes / speed` seconds per token on a node, so the plan
//! that minimises the slowest stage under every node's memory limit is found
//! by dynamic programming over (node, first layer). The master also keeps
//! the embedding and the LM head, which count against its memory.

use anyhow::{bail, Result};
use serde::Serialize;
use std::ops::Range;

/// What the planner knows about one machine.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCapacity {
    pub name: String,
    /// Bytes of weights the node can hold.
    pub memory_bytes: u64,
    /// Weight bytes the node processes per second (measured or estimated).
    pub bytes_per_second: f64,
}

/// One node's share of the model, with the reason it got it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageAssignment {
    pub node: String,
    pub layers: Range<usize>,
    /// Weight bytes of its layers (plus embedding and head on the master).
    pub bytes: u64,
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
}

fn gb(bytes: u64) -> String {
    format!("{:.2} GB", bytes as f64 / 1e9)
}

/// Plans `layer_bytes` (one entry per layer) over `nodes`; `nodes[0]` is the
/// master and also holds `master_extra_bytes` (embedding, head).
pub fn plan(layer_bytes: &[u64], master_extra_bytes: u64, nodes: &[NodeCapacity]) -> Result<Plan> {
    if nodes.is_empty() {
        bail!("no machines to run the model on");
    }
    if let Some(n) = nodes.iter().find(|n| !(n.bytes_per_second > 0.0)) {
        bail!("{} reports no usable speed", n.name);
    }
    let needed: u64 = layer_bytes.iter().sum::<u64>() + master_extra_bytes;
    let available: u64 = nodes.iter().map(|n| n.memory_bytes).sum();
    if needed > available {
        bail!(
            "the model needs {} for its weights but the {} machine(s) have {} available: {} missing",
            gb(needed),
            nodes.len(),
            gb(available),
            gb(needed - available)
        );
    }
    if master_extra_bytes > nodes[0].memory_bytes {
        bail!(
            "{} must hold the embedding and LM head ({}) but has only {} available",
            nodes[0].name,
            gb(master_extra_bytes),
            gb(nodes[0].memory_bytes)
        );
    }

    let layers = layer_bytes.len();
    let mut prefix = vec![0u64; layers + 1];
    for (i, b) in layer_bytes.iter().enumerate() {
        prefix[i + 1] = prefix[i] + b;
    }
    let range_bytes = |a: usize, b: usize| prefix[b] - prefix[a];
    // best[k][i]: the smallest bottleneck for layers i.. on nodes k..; choice[k][i]: where node k's range ends.
    let n = nodes.len();
    let mut best = vec![vec![f64::INFINITY; layers + 1]; n + 1];
    let mut choice = vec![vec![0usize; layers + 1]; n + 1];
    best[n][layers] = 0.0;
    for k in (0..n).rev() {
        let node = &nodes[k];
        let extra = if k == 0 { master_extra_bytes } else { 0 };
        for i in 0..=layers {
            for end in i..=layers {
                let bytes = range_bytes(i, end) + extra;
                if bytes > node.memory_bytes {
                    break;
                }
                let time = range_bytes(i, end) as f64 / node.bytes_per_second;
                let total = time.max(best[k + 1][end]);
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
             (largest layer {}, machines offer {})",
            gb(layer_bytes.iter().copied().max().unwrap_or(0)),
            nodes.iter().map(|n| format!("{} {}", n.name, gb(n.memory_bytes))).collect::<Vec<_>>().join(", ")
        );
    }

    let bottleneck = best[0][0];
    let mut stages = Vec::with_capacity(n);
    let mut start = 0;
    for (k, node) in nodes.iter().enumerate() {
        let end = choice[k][start].max(start);
        let extra = if k == 0 { master_extra_bytes } else { 0 };
        let bytes = range_bytes(start, end) + extra;
        let seconds = range_bytes(start, end) as f64 / node.bytes_per_second;
        let memory_bound = end < layers && bytes + layer_bytes[end] > node.memory_bytes;
        let reason = if end == start {
            "no layers: the others are fast enough and have room".to_string()
        } else if memory_bound {
            format!(
                "{} layers ({}): as many as fit in its {} of memory",
                end - start,
                gb(bytes),
                gb(node.memory_bytes)
            )
        } else {
            format!(
                "{} layers ({}): a share matched to its speed ({:.1} GB/s), {:.1} ms per token",
                end - start,
                gb(bytes),
                node.bytes_per_second / 1e9,
                seconds * 1e3
            )
        };
        stages.push(StageAssignment {
            node: node.name.clone(),
            layers: start..end,
            bytes,
            seconds_per_token: seconds,
            reason,
        });
        start = end;
    }
    Ok(Plan {
        stages,
        bottleneck_seconds: bottleneck,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, memory: u64, speed: f64) -> NodeCapacity {
        NodeCapacity {
            name: name.into(),
            memory_bytes: memory,
            bytes_per_second: speed,
        }
    }

    fn ranges(plan: &Plan) -> Vec<Range<usize>> {
        plan.stages.iter().map(|s| s.layers.clone()).collect()
    }

    #[test]
    fn equal_nodes_split_evenly_and_cover_every_layer() {
        let plan = plan(&[10; 12], 0, &[node("a", 1000, 1.0), node("b", 1000, 1.0), node("c", 1000, 1.0)]).unwrap();
        assert_eq!(ranges(&plan), vec![0..4, 4..8, 8..12]);
        assert_eq!(plan.bottleneck_seconds, 40.0);
    }

    #[test]
    fn a_faster_node_gets_more_layers() {
        let plan = plan(&[10; 12], 0, &[node("slow", 1000, 1.0), node("fast", 1000, 3.0)]).unwrap();
        assert_eq!(ranges(&plan), vec![0..3, 3..12]);
    }

    #[test]
    fn memory_limits_are_respected_and_explained() {
        let plan = plan(&[10; 12], 5, &[node("master", 25, 10.0), node("worker", 1000, 1.0)]).unwrap();
        assert_eq!(ranges(&plan), vec![0..2, 2..12]);
        assert!(plan.stages[0].reason.contains("as many as fit"), "{}", plan.stages[0].reason);
        assert!(plan.stages.iter().all(|s| s.bytes <= 1000));
    }

    #[test]
    fn a_model_too_big_says_how_much_memory_is_missing() {
        let err = plan(&[1_000_000_000; 10], 0, &[node("a", 4_000_000_000, 1.0), node("b", 4_000_000_000, 1.0)]).unwrap_err();
        let message = format!("{err:#}");
        assert!(message.contains("needs 10.00 GB") && message.contains("2.00 GB missing"), "{message}");
    }

    #[test]
    fn contiguity_that_cannot_fit_is_reported() {
        // Total memory suffices, but no single node can hold a 60-byte layer.
        let err = plan(&[60, 10], 0, &[node("a", 40, 1.0), node("b", 40, 1.0)]).unwrap_err();
        assert!(format!("{err:#}").contains("contiguous"), "{err:#}");
    }

    #[test]
    fn the_plan_is_optimal_on_small_cases() {
        // Brute force over all splits of 7 layers between 3 nodes.
        let layers = [5u64, 9, 2, 7, 3, 8, 4];
        let nodes = [node("a", 20, 2.0), node("b", 30, 1.0), node("c", 25, 1.5)];
        let plan = plan(&layers, 0, &nodes).unwrap();
        let mut best = f64::INFINITY;
        for i in 0..=7 {
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
}
