//! Remote segments: a run's segments as Slurm job steps on a cluster's nodes, the coordinator
//! the only writer of `.harnery/` (docs/CLUSTER.md).

pub mod engine;
pub mod host;
pub mod node;
pub mod scratch;
pub mod sync;

/// This harn's version, as `harn --version` prints it.
pub fn version() -> String {
    format!("harn {}", env!("CARGO_PKG_VERSION"))
}
