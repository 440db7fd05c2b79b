//! Planted secrets travel with the traffic that carried them. A secret found in what the
//! server sent ([`crate::observe::secrets`]) is recorded beside the network event it was found
//! in; when attribution moves that event (a timer's upload after its call answered, given to
//! the tool whose replay reproduced it; traffic a lingering thread sent in a later call's
//! window), the sighting follows it, so that the tool that sent the secret is the one named.

use crate::evidence::{NetEvent, Observation, Phase, PhaseObservation, SecretMove, ToolRun};

/// Where an observation sits: a call (tool, call) or a phase window (phase, after tool).
#[derive(Debug, Clone, PartialEq)]
enum Place {
    Call(usize, usize),
    Window(Phase, Option<String>),
}

/// Moves each secret sighting of [`SecretMove::Sent`] that no network event of its own place
/// carried to a place whose events did carry it: a call of the tools that may have sent it
/// first (the tool whose threads did it and the one called before, for a window between
/// calls; the calls in flight beside it, for a call), then any call in order, then the
/// windows between calls. `names` are the tools of `runs`. A sighting whose traffic is
/// nowhere stays where it was found.
pub fn secrets_follow_their_traffic(
    names: &[String],
    runs: &mut [ToolRun],
    phases: &mut Vec<PhaseObservation>,
) {
    let mut places: Vec<(Place, Vec<&NetEvent>)> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        for (j, call) in run.calls.iter().enumerate() {
            let events = call.observations.iter().filter_map(Observation::as_network);
            places.push((Place::Call(i, j), events.collect()));
        }
    }
    for p in phases.iter() {
        let place = Place::Window(p.phase, p.after_tool.clone());
        let Some(n) = p.observation.as_network() else {
            continue;
        };
        match places.iter_mut().find(|(q, _)| *q == place) {
            Some((_, events)) => events.push(n),
            None => places.push((place, vec![n])),
        }
    }
    let carried_in = |place: &Place, o: &Observation| {
        places
            .iter()
            .find(|(q, _)| q == place)
            .is_some_and(|(_, events)| events.iter().any(|n| carries(n, o)))
    };
    let tool_of = |q: &Place| match q {
        Place::Call(i, _) => names.get(*i).map(String::as_str),
        Place::Window(..) => None,
    };
    let home_of = |o: &Observation, suspects: &[&str]| {
        let carrying = || {
            places
                .iter()
                .filter(|(_, events)| events.iter().any(|n| carries(n, o)))
        };
        carrying()
            .find(|(q, _)| tool_of(q).is_some_and(|t| suspects.contains(&t)))
            .or_else(|| carrying().next())
            .map(|(q, _)| q.clone())
    };
    // (from, index there, to)
    let mut moves: Vec<(Place, usize, Place)> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        for (j, call) in run.calls.iter().enumerate() {
            let here = Place::Call(i, j);
            let suspects: Vec<&str> = call.concurrent_tools.iter().map(String::as_str).collect();
            for (k, o) in call.observations.iter().enumerate() {
                if is_sent(o) && !carried_in(&here, o) {
                    if let Some(to) = home_of(o, &suspects) {
                        moves.push((here.clone(), k, to));
                    }
                }
            }
        }
    }
    for (k, p) in phases.iter().enumerate() {
        let here = Place::Window(p.phase, p.after_tool.clone());
        if is_sent(&p.observation) && !carried_in(&here, &p.observation) {
            let suspects: Vec<&str> = p
                .started_by
                .iter()
                .chain(&p.after_tool)
                .map(String::as_str)
                .collect();
            if let Some(to) = home_of(&p.observation, &suspects) {
                moves.push((here, k, to));
            }
        }
    }
    drop(places);
    // Taken out from the last index down, so the earlier indices still hold.
    moves.sort_by_key(|(_, k, _)| std::cmp::Reverse(*k));
    for (from, k, to) in moves {
        let o = match from {
            Place::Call(i, j) => runs[i].calls[j].observations.remove(k),
            Place::Window(..) => phases.remove(k).observation,
        };
        match to {
            Place::Call(i, j) => runs[i].calls[j].observations.push(o),
            Place::Window(phase, after_tool) => phases.push(PhaseObservation {
                phase,
                after_tool,
                started_by: None,
                observation: o,
            }),
        }
    }
}

fn is_sent(o: &Observation) -> bool {
    matches!(o, Observation::Secret(s) if s.how == SecretMove::Sent && s.target.is_some())
}

/// Whether `n` is the traffic a sent secret `o` names as its target (`host[:port] (channel)`,
/// the host a name, an address, or the parent domain of a name that held the secret).
fn carries(n: &NetEvent, o: &Observation) -> bool {
    let Observation::Secret(s) = o else {
        return false;
    };
    let Some(destination) = s.target.as_deref().and_then(|t| t.split(" (").next()) else {
        return false;
    };
    let port = n.port.map(|p| format!(":{p}")).unwrap_or_default();
    let names = n.name.iter().chain(std::iter::once(&n.destination));
    names.into_iter().any(|h| {
        let parent = crate::observe::secrets::parent_domain(h);
        [h.as_str(), parent.as_str()]
            .iter()
            .any(|h| destination == format!("{h}{port}") || destination == *h)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{Carried, Mechanism, NetKind, SecretSighting};

    fn upload() -> Observation {
        Observation::Network(NetEvent {
            kind: NetKind::Connect,
            destination: "198.18.0.4".into(),
            port: Some(80),
            name: Some("backup.exfil.test".into()),
            loopback: false,
            mechanism: Mechanism::Payload,
            payload: Some("HTTP \"POST /up HTTP/1.1\"".into()),
            carried: Carried::default(),
        })
    }

    fn sent(target: &str) -> Observation {
        Observation::Secret(SecretSighting {
            how: SecretMove::Sent,
            kind: "aws-secret-access-key".into(),
            place: "~/.aws/credentials".into(),
            encoding: "gzip".into(),
            target: Some(target.into()),
            asked: false,
            swept: false,
            mechanism: Mechanism::Payload,
        })
    }

    #[test]
    fn a_sighting_follows_the_upload_that_carried_it_to_the_tool_it_was_given_to() {
        let call = |observations| ToolRun {
            calls: vec![crate::audit::testing::call(
                1,
                crate::audit::testing::ok(),
                observations,
            )],
            ..ToolRun::default()
        };
        // A replay gave the timer's upload to backup_config; the secret found in it was left
        // in the window after the call, and another, in an honest tool's window, rode on
        // traffic of its own.
        let mut runs = vec![
            call(vec![upload()]),
            call(vec![
                sent("api.weather.test:443 (HTTPS request)"),
                Observation::Network(NetEvent {
                    name: Some("api.weather.test".into()),
                    port: Some(443),
                    ..match upload() {
                        Observation::Network(n) => n,
                        _ => unreachable!(),
                    }
                }),
            ]),
        ];
        let mut phases = vec![PhaseObservation {
            phase: Phase::Idle,
            after_tool: Some("backup_config".into()),
            started_by: None,
            observation: sent("backup.exfil.test:80 (HTTP request)"),
        }];
        let names = ["backup_config".to_string(), "fetch_weather".to_string()];
        secrets_follow_their_traffic(&names, &mut runs, &mut phases);
        assert!(phases.is_empty(), "{phases:?}");
        assert_eq!(runs[0].calls[0].observations.len(), 2);
        assert!(matches!(
            runs[0].calls[0].observations[1],
            Observation::Secret(_)
        ));
        assert_eq!(runs[1].calls[0].observations.len(), 2, "stays with its own");
        // A sighting whose traffic is nowhere stays.
        let mut phases = vec![PhaseObservation {
            phase: Phase::Startup,
            after_tool: None,
            started_by: None,
            observation: sent("elsewhere.test:80 (HTTP request)"),
        }];
        secrets_follow_their_traffic(&names, &mut runs, &mut phases);
        assert_eq!(phases.len(), 1);
        // Two tools reached the same host: the sighting goes to the one whose threads sent
        // it (or that came last before its window), not to the first in order.
        let mut runs = vec![call(vec![upload()]), call(vec![upload()])];
        let mut phases = vec![PhaseObservation {
            phase: Phase::Idle,
            after_tool: Some("nightly_sync".into()),
            started_by: None,
            observation: sent("backup.exfil.test:80 (HTTP request)"),
        }];
        let names = ["list_backups".to_string(), "nightly_sync".to_string()];
        secrets_follow_their_traffic(&names, &mut runs, &mut phases);
        assert_eq!(
            (
                runs[0].calls[0].observations.len(),
                runs[1].calls[0].observations.len()
            ),
            (1, 2)
        );
    }
}
