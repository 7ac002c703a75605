//! Who is attached to a terminal harness: one client that types, any number that watch.
//!
//! Attachments belong to connections, not to intent: they are never persisted, a daemon that
//! boots has none, and attaching or detaching never touches a harness's lifecycle (a dropped
//! connection must not stop an agent session). Each attachment is to one run; when the run
//! ends its attachments lapse with it, so a new run's writer slot is free.

use super::{Daemon, DaemonEffect};
use crate::error::RecordError;
use crate::ids::Id;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A client's attachment to one run of a terminal harness.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Attachment {
    /// The harness.
    pub name: Id,
    /// The run whose terminal the client sees.
    pub run: u64,
    /// True for the one client whose keys and window size reach the terminal.
    pub writes: bool,
}

/// Every attachment, by client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Attachments {
    by_client: BTreeMap<u64, Attachment>,
}

impl Daemon {
    /// Attaches `client` to `name`'s live terminal, as the writer unless `read_only`. Refused
    /// for a harness without a terminal or without a live run, for a client already attached,
    /// and for a second writer while the first is attached to the same run.
    pub(super) fn attach(
        &mut self,
        client: u64,
        name: Id,
        read_only: bool,
    ) -> Result<Attachment, RecordError> {
        let h = self
            .harnesses
            .get(&name)
            .ok_or_else(|| RecordError::refused(format!("no harness named {name}")))?;
        if h.active_spec().spawn.tty.is_none() {
            return Err(RecordError::refused(format!(
                "{name} has no terminal to attach to: give it tty = true in harness.toml \
                 (its output is in harn harness logs {name})"
            )));
        }
        let run = match (h.current_run(), h.pid()) {
            (Some(run), Some(_)) => run,
            _ => {
                return Err(RecordError::refused(format!(
                    "{name} has no running session ({}): start it with harn harness start {name}",
                    h.state().as_str()
                )))
            }
        };
        if self.attachments.by_client.contains_key(&client) {
            return Err(RecordError::refused(format!("client {client} is already attached")));
        }
        if !read_only && self.writer_of(&name, run).is_some() && !self.planted_second_typist() {
            return Err(RecordError::refused(format!(
                "{name} already has a client attached that types; watch with --read-only"
            )));
        }
        let attachment = Attachment { name, run, writes: !read_only };
        self.attachments.by_client.insert(client, attachment.clone());
        Ok(attachment)
    }

    /// Ends `client`'s attachment, if it has one. Nothing else changes.
    pub(super) fn detach(&mut self, client: u64) {
        self.attachments.by_client.remove(&client);
    }

    /// Forgets attachments to runs that are no longer live.
    pub(super) fn lapse_attachments(&mut self) {
        let harnesses = &self.harnesses;
        self.attachments.by_client.retain(|_, a| {
            harnesses
                .get(&a.name)
                .is_some_and(|h| h.current_run() == Some(a.run) && h.pid().is_some())
        });
    }

    /// The client typing into run `run` of `name`, if any.
    fn writer_of(&self, name: &Id, run: u64) -> Option<u64> {
        let by_client = &self.attachments.by_client;
        by_client.iter().find(|(_, a)| a.writes && a.name == *name && a.run == run).map(|(c, _)| *c)
    }

    /// Every live attachment, by client.
    pub(crate) fn attachments(&self) -> &BTreeMap<u64, Attachment> {
        &self.attachments.by_client
    }

    /// Every attachment is to the live run of a terminal harness, and each run has at most
    /// one writer.
    pub(super) fn check_attachments(&self) -> Result<(), crate::error::InvariantError> {
        let mut writers = std::collections::BTreeSet::new();
        for (client, a) in &self.attachments.by_client {
            let fail = |why: &str| {
                crate::error::InvariantError::new(format!(
                    "client {client} attached to {} run {}: {why}",
                    a.name, a.run
                ))
            };
            let h = self.harnesses.get(&a.name).ok_or_else(|| fail("no such harness"))?;
            if h.current_run() != Some(a.run) || h.pid().is_none() {
                return Err(fail("the run is not live"));
            }
            if h.active_spec().spawn.tty.is_none() {
                return Err(fail("the harness has no terminal"));
            }
            if a.writes && !writers.insert((&a.name, a.run)) {
                return Err(fail("a second writer"));
            }
        }
        Ok(())
    }

    /// Handles an attach or detach: the answer goes out as [`DaemonEffect::Attached`].
    pub(super) fn handle_attach(&mut self, client: u64, name: Id, read_only: bool) {
        self.lapse_attachments();
        let result = self.attach(client, name.clone(), read_only);
        self.effects.push_back(DaemonEffect::Attached { client, name, result });
    }
}
