//! Running one model across the machines of a LAN.
//!
//! - [`admission`]: what a peer without the key can cost a worker.
//! - [`cluster_key`]: the shared secret, its public cluster id, generating one.
//! - [`secure_channel`]: the mutually authenticated, encrypted connection
//!   every cluster message travels over.
//! - [`protocol`]: the messages inside it.
//! - [`machine`]: what a machine offers (memory, speed); [`gpu_probe`]: its GPU's.
//! - [`discovery`]: finding workers with mDNS.
//! - [`assignment`]: which machine runs which layers.
//! - [`worker`]: the worker's side; [`remote`]: the master's handle on a worker.
//! - [`relay`]: hidden states passed from one worker straight to the next.
//! - [`master`]: loading a model split over the master and its workers.
//! - [`decode_steps`]: pipelined decode steps or one machine after another.
//! - [`topology`]: a hand-written layout overriding the automatic one.
//! - [`recovery`]: finishing a reply after losing a worker.
//! - [`monitor`]: the master's live view of its cluster, for the UI.
//! - [`weight_transfer`]: sending workers exactly the weights of their layers.

pub mod admission;
pub mod assignment;
pub mod cluster_key;
pub mod decode_steps;
pub mod discovery;
pub mod gpu_probe;
pub mod layer_probe;
pub mod machine;
pub mod master;
pub mod monitor;
pub mod prediction;
pub mod protocol;
pub mod recovery;
pub mod relay;
pub mod remote;
pub mod secure_channel;
pub mod topology;
pub mod weight_transfer;
pub mod worker;
