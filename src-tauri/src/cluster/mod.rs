//! Running one model across the machines of a LAN.
//!
//! So far: [`secure_channel`], the mutually authenticated, encrypted
//! connection every cluster message travels over.

pub mod secure_channel;
