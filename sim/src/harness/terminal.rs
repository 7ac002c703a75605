//! Terminal harnesses in the simulated world: people attaching and detaching (watching or
//! typing) as operator inputs, and the checks that attaching never moves a harness, that each
//! run has one typist at most, and that a terminal session is hung up before it is asked to
//! terminate.

use crate::entropy::Entropy;
use crate::harness::options::harness_name;
use crate::harness::trace::StepEvent;
use crate::harness::world::{Client, HarnessWorld};
use harn_core::env::{Pid, Signal};
use harn_core::harness::daemon::{Daemon, DaemonInput};
use harn_core::harness::driver::{Executed, Wake};
use harn_core::ids::Id;
use std::collections::BTreeMap;

/// Every harness's lifecycle view that an attach must leave alone.
type Lifecycles = Vec<(Id, &'static str, Option<u64>, Option<Pid>, bool)>;

fn lifecycles(daemon: &Daemon) -> Lifecycles {
    let view = daemon.harnesses().iter();
    view.map(|(n, h)| (n.clone(), h.state().as_str(), h.current_run(), h.pid(), h.ready()))
        .collect()
}

impl<E: Entropy> HarnessWorld<E> {
    /// A person attaches (typing, or watching with `--read-only`) to a harness, or an
    /// attached client detaches (or its connection drops).
    pub(crate) fn attachment_wake(&mut self) -> (StepEvent, Wake) {
        self.lapse_clients();
        let attached: Vec<u64> = self.clients.keys().copied().collect();
        if !attached.is_empty() && self.entropy.chance(1, 2) {
            let client = attached[self.entropy.below(attached.len() as u64) as usize];
            self.clients.remove(&client);
            let event = StepEvent::Detach { client };
            return (event, Wake::Input(DaemonInput::Detach { client }));
        }
        self.next_client += 1;
        let client = self.next_client;
        let count = self.options.harnesses.len() as u64;
        let name = harness_name(self.entropy.below(count) as usize);
        let read_only = self.entropy.chance(1, 3);
        let event = StepEvent::Attach { client, name: name.to_string(), read_only };
        self.asked = Some((client, name.clone(), read_only));
        (event, Wake::Input(DaemonInput::Attach { client, name, read_only }))
    }

    /// Forgets clients whose run ended (the daemon closes their connections).
    fn lapse_clients(&mut self) {
        let Some(daemon) = self.daemon() else {
            self.clients.clear();
            return;
        };
        let live: BTreeMap<Id, u64> = daemon
            .harnesses()
            .iter()
            .filter(|(_, h)| h.pid().is_some())
            .filter_map(|(n, h)| h.current_run().map(|r| (n.clone(), r)))
            .collect();
        self.clients.retain(|_, c| live.get(&c.name) == Some(&c.run));
    }

    /// The lifecycle view before a step, when the step delivers an attach or a detach.
    pub(crate) fn before_attachment(&self, wake: &Wake) -> Option<Lifecycles> {
        let is_attachment =
            matches!(wake, Wake::Input(DaemonInput::Attach { .. } | DaemonInput::Detach { .. }));
        is_attachment.then(|| self.daemon().map(lifecycles)).flatten()
    }

    /// Checks a step's terminal facts: an attach or detach moved no harness and did nothing
    /// but answer; a grant matches what a person may be given; every SIGTERM to a terminal
    /// harness's run follows its hang-up, and only terminal harnesses are hung up.
    pub(crate) fn check_terminal(
        &mut self,
        executed: &[Executed],
        before: Option<Lifecycles>,
    ) -> Result<(), (String, String)> {
        let asked = self.asked.take();
        // Field by field: the core is read while the world's own record of clients changes.
        let Some((_, daemon)) = self.up.as_ref() else { return Ok(()) };
        let fail = |inv: &str, detail: String| Err((inv.to_owned(), detail));
        let tty = |name: &Id| {
            daemon.harnesses().get(name).is_some_and(|h| h.active_spec().spawn.tty.is_some())
        };
        let mut hung_up = Vec::new();
        for e in executed {
            let Executed::Signalled { name, pid, signal } = e else { continue };
            match signal {
                Signal::Hangup if !tty(name) => {
                    return fail("hangup-only-terminals", format!("{name} has no terminal"));
                }
                Signal::Hangup => hung_up.push(*pid),
                Signal::Term if tty(name) && !hung_up.contains(pid) => {
                    let detail = format!("{name}: SIGTERM to {pid} before its terminal hung up");
                    return fail("hangup-before-term", detail);
                }
                _ => {}
            }
        }
        if let Some(before) = before {
            let after = lifecycles(daemon);
            if after != before {
                return fail("attach-moves-nothing", format!("{before:?} became {after:?}"));
            }
            if let Some(other) = executed.iter().find(|e| !matches!(e, Executed::Attached { .. })) {
                return fail("attach-moves-nothing", format!("an attach led to {other:?}"));
            }
        }
        let Some((client, name, read_only)) = asked else { return Ok(()) };
        let answer = executed.iter().find_map(|e| match e {
            Executed::Attached { client: c, run, writes, error, .. } if *c == client => {
                Some((*run, *writes, error.clone()))
            }
            _ => None,
        });
        let Some((run, writes, error)) = answer else {
            return fail("attach-answered", format!("client {client} got no answer"));
        };
        let h = daemon.harnesses().get(&name);
        let live = h.filter(|h| h.pid().is_some()).and_then(|h| h.current_run());
        let typist =
            self.clients.values().any(|c| c.name == name && Some(c.run) == live && c.writes);
        let may = tty(&name) && live.is_some() && (read_only || !typist);
        match (run, error) {
            (Some(run), None) if may && Some(run) == live && writes != read_only => {
                self.clients.insert(client, Client { name, run, writes });
                Ok(())
            }
            (None, Some(_)) if !may => Ok(()),
            (run, error) => fail(
                "attach-as-allowed",
                format!(
                    "{name} (terminal: {}, live run {live:?}, typist: {typist}) asked by \
                     client {client}, read-only {read_only}: got run {run:?}, writes {writes}, \
                     {error:?}",
                    tty(&name)
                ),
            ),
        }
    }
}
