//! Files on disk, below everything else: where Cake's data folder and the
//! Hugging Face cache are ([`paths`], [`hf_cache`]), and writing a file so
//! that a crash never leaves it half-written ([`storage`]).

pub mod hf_cache;
pub mod paths;
pub mod storage;
