//! harn-core: the pure, deterministic heart of harn. State machines, formats and projections,
//! all plain functions of their inputs and `now`. The crate performs no IO of its own: the
//! short durable transactions it holds (a journal append, a ledger step, a plan record) read
//! and write only through the `Fs` seam a host provides (`env`), and the long-lived loops are
//! sans-IO machines that hand back effects.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod atomic;
pub mod env;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod goal;
pub mod harness;
pub mod hash;
pub mod ids;
pub mod index;
pub mod journal;
pub mod layout;
pub mod limits;
pub mod notify;
#[cfg(feature = "planted-bugs")]
pub mod planted;
pub mod service;
pub mod signature;
pub mod text;
pub mod time;
pub mod web;
pub mod work;
