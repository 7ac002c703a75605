//! harn-sim: drives harn-core through crashes, restarts, missed wakes and torn writes.
#![forbid(unsafe_code)]

pub mod entropy;
