//! Running one model across the machines of a LAN.
//!
//! So far: [`secure_channel`], the mutually authenticated, encrypted
//! connection every cluster message travels over, and [`assignment`], which
//! decides which machine runs which layers.

pub mod assignment;
pub mod secure_channel;
