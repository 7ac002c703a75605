//! harn-core: the pure, deterministic heart of harn. State machines, formats and projections,
//! all plain functions of their inputs and `now`. This crate performs no IO of any kind.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod atomic;
pub mod env;
#[doc(hidden)]
pub mod fuzzing;
pub mod goal;
pub mod harness;
pub mod hash;
pub mod ids;
pub mod journal;
pub mod layout;
pub mod service;
pub mod text;
pub mod time;
pub mod work;
pub mod workflow;
