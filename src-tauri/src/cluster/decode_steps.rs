//! How the decode steps of several conversations go through a cluster:
//! pipelined (each machine on a different group of them at once) or one
//! machine after another, and the rule that chooses between them.

use super::protocol::WorkerInfo;

/// How the decode steps of several conversations in flight go through a
/// cluster whose workers form one route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DecodeSteps {
    /// Pipelined unless two of the machines run on one kernel (processes,
    /// containers or network namespaces of one host), whose cores they
    /// share: steps in flight at once would only make them take turns.
    #[default]
    Auto,
    /// The conversations split into as many groups as there are machines,
    /// each machine working on a different group at once.
    Pipelined,
    /// Every conversation's step together, through one machine after the other.
    OneAtATime,
}

/// What [`DecodeSteps`] comes to over a cluster's machines, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StepsChoice {
    pub pipelined: bool,
    pub why: &'static str,
}

impl DecodeSteps {
    /// Whether steps are pipelined over `machines`, and why.
    pub fn choose(self, machines: &[&WorkerInfo]) -> StepsChoice {
        let pipelined = StepsChoice { pipelined: true, why: "each machine works on a different group of them at once" };
        match self {
            Self::Pipelined => pipelined,
            Self::OneAtATime => StepsChoice { pipelined: false, why: "as asked (--decode-steps one-at-a-time)" },
            Self::Auto if share_a_kernel(machines) => StepsChoice {
                pipelined: false,
                why: "machines here share a kernel, and so its cores: they would only take turns",
            },
            Self::Auto => pipelined,
        }
    }
}

/// Whether two of `machines` report the same kernel (an unknown one is
/// taken as its own).
fn share_a_kernel(machines: &[&WorkerInfo]) -> bool {
    let mut boots: Vec<&str> = machines.iter().map(|m| m.kernel_boot.as_str()).filter(|b| !b.is_empty()).collect();
    let known = boots.len();
    boots.sort_unstable();
    boots.dedup();
    boots.len() < known
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::machine;
    use crate::models::gpu_offload::GpuRequest;

    fn on_kernel(kernel_boot: &str) -> WorkerInfo {
        let mut info = machine::describe("m", Some(1 << 30), GpuRequest::default());
        info.kernel_boot = kernel_boot.to_string();
        info
    }

    #[test]
    fn auto_pipelines_steps_unless_two_machines_share_a_kernel() {
        let (a, b, c, unknown) = (on_kernel("a"), on_kernel("b"), on_kernel("c"), on_kernel(""));
        let pipelines = |steps: DecodeSteps, machines: &[&WorkerInfo]| steps.choose(machines).pipelined;
        assert!(pipelines(DecodeSteps::Auto, &[&a, &b, &c]));
        assert!(pipelines(DecodeSteps::Auto, &[&a, &unknown, &unknown]), "unknown kernels count as distinct");
        assert!(!pipelines(DecodeSteps::Auto, &[&a, &b, &a]));
        assert!(pipelines(DecodeSteps::Pipelined, &[&a, &a]));
        assert!(!pipelines(DecodeSteps::OneAtATime, &[&a, &b]));
        assert_eq!(machine::describe("m", None, GpuRequest::default()).kernel_boot.len(), 16, "read on Linux");
    }
}
