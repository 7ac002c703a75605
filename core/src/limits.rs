//! Resource limits of what harn runs, as systemd gives every unit `TasksMax=`, `MemoryMax=` and
//! `CPUWeight=`: a task limit, a memory limit (with no swap beyond it), a CPU weight, and the
//! size of each tmpfs a run is given. A run takes them from `.harnery/config.json`'s `limits`
//! (overridable per run), frozen into its manifest; a harness from `harness.toml`. What
//! reaching one means, in words a person reads, is decided here once.

use serde::{Deserialize, Serialize};

/// A limit refused, naming its key. (The limits are a leaf of the core: `env`'s spawn spec
/// carries them, so they depend on nothing of the core's.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitError {
    /// The key (`memory`, `tasks`, `cpu_weight`, `tmpfs`, or what was given).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl LimitError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> LimitError {
        LimitError { field: field.into(), message: message.into() }
    }

    /// The same error, about `field`.
    fn of(self, field: &str) -> LimitError {
        LimitError { field: field.to_owned(), ..self }
    }
}

impl std::fmt::Display for LimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for LimitError {}

/// The limits of one run or harness; `None` leaves that resource unlimited.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(deny_unknown_fields)]
pub struct ResourceLimits {
    /// Most processes and threads at once (`pids.max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u64>,
    /// Most bytes of memory (`memory.max`, and no swap beyond it); `"8G"` or a number of bytes.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "bytes_field")]
    pub memory: Option<u64>,
    /// The share of CPU time under contention, 1 to 10,000 (`cpu.weight`; 100 is a fair share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_weight: Option<u32>,
    /// Most bytes of each tmpfs a run is given (its private `/dev/shm`, a sealed call's `/tmp`).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "bytes_field")]
    pub tmpfs: Option<u64>,
    /// Most bytes a run's own disk space may hold: its repository of its own (under
    /// `--isolation worktree`) and its temporary directory, watched every
    /// [`DISK_WATCH_INTERVAL`]; a run that reaches it is ended.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "bytes_field")]
    pub disk: Option<u64>,
}

/// How often a run's disk space is measured against its `disk` limit (no filesystem here
/// gives a directory a quota for free, so harn watches).
pub const DISK_WATCH_INTERVAL: crate::time::Duration = crate::time::Duration::from_secs(2);

/// The limits a run gets when the configuration names none: what a real agent with a real
/// build (Claude Code running `cargo test` on a large workspace) never meets, and a fork bomb
/// or a leak does.
pub const RUN_DEFAULTS: ResourceLimits = ResourceLimits {
    tasks: Some(4096),
    memory: Some(8 << 30),
    cpu_weight: Some(100),
    tmpfs: Some(1 << 30),
    disk: None,
};

impl ResourceLimits {
    /// These limits, each one `over` names replacing this one's.
    pub fn with(self, over: &ResourceLimits) -> ResourceLimits {
        ResourceLimits {
            tasks: over.tasks.or(self.tasks),
            memory: over.memory.or(self.memory),
            cpu_weight: over.cpu_weight.or(self.cpu_weight),
            tmpfs: over.tmpfs.or(self.tmpfs),
            disk: over.disk.or(self.disk),
        }
    }

    /// Checks each value is one the kernel takes.
    pub fn check(&self) -> Result<(), LimitError> {
        if self.tasks == Some(0) {
            return Err(LimitError::new("tasks", "must be at least 1"));
        }
        if let Some(w) = self.cpu_weight.filter(|w| !(1..=10_000).contains(w)) {
            return Err(LimitError::new("cpu_weight", format!("{w} is not within 1 to 10000")));
        }
        for (field, v) in [("memory", self.memory), ("tmpfs", self.tmpfs), ("disk", self.disk)] {
            if v.is_some_and(|v| v < 1 << 20) {
                return Err(LimitError::new(field, "must be at least 1M"));
            }
        }
        Ok(())
    }

    /// Sets one limit from `KEY=VALUE` as a person types it (`memory=256M`, `tasks=64`).
    pub fn set(&mut self, assignment: &str) -> Result<(), LimitError> {
        let (key, value) = assignment.split_once('=').ok_or_else(|| {
            LimitError::new(
                assignment,
                "expected KEY=VALUE (tasks, memory, cpu_weight, tmpfs, disk)",
            )
        })?;
        let number = |v: &str| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| LimitError::new(key, format!("{v:?} is not a number")))
        };
        match key.trim() {
            "tasks" => self.tasks = Some(number(value)?),
            "memory" => self.memory = Some(parse_bytes(value).map_err(|e| e.of(key))?),
            "tmpfs" => self.tmpfs = Some(parse_bytes(value).map_err(|e| e.of(key))?),
            "disk" => self.disk = Some(parse_bytes(value).map_err(|e| e.of(key))?),
            "cpu_weight" => {
                let w = number(value)?;
                self.cpu_weight = Some(u32::try_from(w).unwrap_or(u32::MAX));
            }
            other => {
                return Err(LimitError::new(
                    other,
                    "not a limit (tasks, memory, cpu_weight, tmpfs, disk)",
                ))
            }
        }
        self.check()
    }
}

/// A size as people write it: a whole number of bytes, or one with `K`, `M`, `G` or `T`
/// (powers of 1024, as systemd reads them; `Ki`, `KiB` and `KB` mean the same).
pub fn parse_bytes(text: &str) -> Result<u64, LimitError> {
    let t = text.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = t.split_at(digits);
    let bad = |why: String| LimitError::new("size", why);
    let n: u64 =
        number.parse().map_err(|_| bad(format!("{text:?} is not a size (say 512M or 8G)")))?;
    let unit = unit.trim().trim_end_matches(['B', 'b']).trim_end_matches('i');
    let shift = match unit {
        "" => 0,
        "K" | "k" => 10,
        "M" | "m" => 20,
        "G" | "g" => 30,
        "T" | "t" => 40,
        _ => return Err(bad(format!("{text:?}: unknown unit (K, M, G or T)"))),
    };
    n.checked_mul(1 << shift).ok_or_else(|| bad(format!("{text:?} is too large")))
}

/// A size in the largest unit that divides it (`256M`, `8G`, `1536K`).
pub fn show_bytes(n: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if n != 0 && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// A limit a run or a harness reached, as the kernel counted it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "limit")]
pub enum LimitReached {
    /// The memory limit: the OOM killer ended processes (`memory.events` `oom_kill`).
    Memory {
        /// The limit, in bytes.
        max: u64,
        /// How many processes the OOM killer ended.
        oom_kills: u64,
    },
    /// The task limit: forks and clones were refused (`pids.events` `max`).
    Tasks {
        /// The limit.
        max: u64,
        /// How many were refused.
        refused: u64,
    },
    /// The disk limit: the run's repository and temporary directory held more (measured by
    /// harn, which then ended the run).
    Disk {
        /// The limit, in bytes.
        max: u64,
        /// What they held when measured.
        used: u64,
    },
}

impl LimitReached {
    /// What the kernel's counters say of `limits`, most telling first: an OOM kill ends a
    /// process outright, a refused fork may only fail it.
    pub fn from_counters(
        limits: &ResourceLimits,
        oom_kills: u64,
        refused: u64,
    ) -> Vec<LimitReached> {
        let mut out = Vec::new();
        if let (Some(max), 1..) = (limits.memory, oom_kills) {
            out.push(LimitReached::Memory { max, oom_kills });
        }
        if let (Some(max), 1..) = (limits.tasks, refused) {
            out.push(LimitReached::Tasks { max, refused });
        }
        out
    }
}

impl std::fmt::Display for LimitReached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitReached::Memory { max, oom_kills } => write!(
                f,
                "its memory limit of {} was reached: the OOM killer ended {oom_kills} process{} \
                 (memory.events oom_kill {oom_kills})",
                show_bytes(*max),
                if *oom_kills == 1 { "" } else { "es" }
            ),
            LimitReached::Tasks { max, refused } => write!(
                f,
                "its task limit of {max} was reached: {refused} fork{} refused (pids.events max \
                 {refused})",
                if *refused == 1 { " was" } else { "s were" }
            ),
            LimitReached::Disk { max, used } => write!(
                f,
                "its disk limit of {} was reached: its repository and temporary files held {} \
                 (measured every {} s, and the run was ended)",
                show_bytes(*max),
                show_bytes(*used),
                DISK_WATCH_INTERVAL.as_millis() / 1000
            ),
        }
    }
}

/// Reads a size from a number of bytes or a string (`"8G"`), writes it as a number.
mod bytes_field {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }

    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(n) => s.serialize_u64(*n),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        match Option::<Size>::deserialize(d)? {
            None => Ok(None),
            Some(Size::Bytes(n)) => Ok(Some(n)),
            Some(Size::Text(t)) => {
                super::parse_bytes(&t).map(Some).map_err(|e| serde::de::Error::custom(e.message))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(parse_bytes("8G"), Ok(8 << 30));
        assert_eq!(parse_bytes("256M"), Ok(256 << 20));
        assert_eq!(parse_bytes("64KiB"), Ok(64 << 10));
        assert_eq!(parse_bytes(" 1024 "), Ok(1024));
        assert_eq!(parse_bytes("2 GB"), Ok(2 << 30));
        assert!(parse_bytes("8X").is_err());
        assert!(parse_bytes("G").is_err());
        assert!(parse_bytes("99999999999T").is_err());
        assert_eq!(show_bytes(256 << 20), "256M");
        assert_eq!(show_bytes(8 << 30), "8G");
        assert_eq!(show_bytes(1000), "1000");
    }

    #[test]
    fn the_configuration_reads_strings_or_numbers_and_refuses_unknown_keys() {
        let l: ResourceLimits =
            serde_json::from_str(r#"{"tasks": 64, "memory": "256M", "cpu_weight": 50}"#).unwrap();
        assert_eq!(l.tasks, Some(64));
        assert_eq!(l.memory, Some(256 << 20));
        assert_eq!(l.tmpfs, None);
        assert_eq!(
            serde_json::to_string(&l).unwrap(),
            r#"{"tasks":64,"memory":268435456,"cpu_weight":50}"#
        );
        assert!(serde_json::from_str::<ResourceLimits>(r#"{"memroy": "1G"}"#).is_err());
        assert!(serde_json::from_str::<ResourceLimits>(r#"{"memory": "lots"}"#).is_err());
    }

    #[test]
    fn overrides_replace_only_what_they_name_and_bad_values_are_refused() {
        let mut over = ResourceLimits::default();
        over.set("tasks=64").unwrap();
        over.set("memory=256M").unwrap();
        let l = RUN_DEFAULTS.with(&over);
        assert_eq!((l.tasks, l.memory, l.cpu_weight), (Some(64), Some(256 << 20), Some(100)));
        assert_eq!(over.set("cpu_weight=0").unwrap_err().field, "cpu_weight");
        assert_eq!(ResourceLimits::default().set("swap=1G").unwrap_err().field, "swap");
        assert_eq!(ResourceLimits::default().set("disk=lots").unwrap_err().field, "disk");
        let mut disk = ResourceLimits::default();
        disk.set("disk=10G").unwrap();
        assert_eq!(RUN_DEFAULTS.with(&disk).disk, Some(10 << 30));
        assert!(ResourceLimits::default().set("tasks").is_err());
        assert!(ResourceLimits::default().set("memory=10K").is_err());
    }

    #[test]
    fn a_reached_limit_names_the_figure_the_kernel_counted() {
        let l = ResourceLimits { tasks: Some(64), memory: Some(256 << 20), ..Default::default() };
        assert!(LimitReached::from_counters(&l, 0, 0).is_empty());
        let hit = LimitReached::from_counters(&l, 1, 12);
        assert_eq!(
            hit[0].to_string(),
            "its memory limit of 256M was reached: the OOM killer ended 1 process (memory.events \
             oom_kill 1)"
        );
        assert_eq!(
            hit[1].to_string(),
            "its task limit of 64 was reached: 12 forks were refused (pids.events max 12)"
        );
        let unlimited = ResourceLimits::default();
        assert!(LimitReached::from_counters(&unlimited, 3, 3).is_empty());
    }
}
