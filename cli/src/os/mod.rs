//! The bottom room: operating-system plumbing that every subsystem uses and none owns. The
//! real `Fs` and `Clock` behind the core's seams (`fs`, `private`, `clock`), the coordination
//! root and its ledger handle (`root`, `store`), cgroups and `/proc` (`cgroup`, `procfs`), the
//! process groups a tick started (`children`), resource limits on a cgroup (`limits`), log files with rotation (`logs`), what a sleeping daemon gives back (`memory`), sd_notify
//! (`sdnotify`), systemd unit installation (`unit`), the password database (`user`) and a
//! user's identity to run as (`identity`), and the guarded paths' journal with the digests
//! of what runs must not change (`guarded`).
//! Nothing here imports a subsystem.

pub mod cgroup;
pub mod children;
pub mod clock;
pub mod fs;
pub mod guarded;
pub mod identity;
pub mod limits;
pub mod logs;
pub mod memory;
pub mod private;
pub mod procfs;
pub mod root;
pub mod sdnotify;
pub mod store;
pub mod tcp_peer;
pub mod unit;
pub mod user;
