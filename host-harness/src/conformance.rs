//! The conformance suite: JSON cases, each a recorded request (the
//! `policy eval` format) plus what the policy must answer, so that any policy
//! can be checked in any host, and two hosts can be shown to agree.
//!
//! ```json
//! {"description": "a lock 1ns past stale-after is removed",
//!  "contract": "0.2.0",
//!  "now": "...", "locks": [...], "settings": {...},
//!  "expect": {
//!    "verdicts": [{"id": "a", "action": "remove", "rule": "expired",
//!                  "reason_contains": ["30m0.000000001s"]}],
//!    "counts": {"expired": 2000},
//!    "logs": [{"level": "warn", "contains": "has not refreshed"}],
//!    "error": {"kind": "invalid-setting", "contains": "stale-after"}}}
//! ```
//!
//! Without `counts`, `verdicts` lists every verdict in order. With it, the
//! listed verdicts are looked up by id and `counts` gives the number of
//! verdicts per rule. `logs`, when present, lists every log line. `error`
//! means the policy must refuse the request.
//!
//! `contract`, when present, is the least contract version whose facts the
//! case needs (such as `stored-at`, new in 0.2.0): a policy implementing an
//! older contract never receives those facts, so [`run_suite`] skips the case
//! for it and counts it as skipped. Without `contract` a case holds for every
//! contract version the host runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::contract::{EvaluateRequest, PolicyError};
use crate::request::Prepared;
use crate::runtime::{Outcome, PluginError, Policy, Runtime};

/// One case file.
#[derive(Debug)]
pub struct Case {
    /// The file name without `.json`.
    pub name: String,
    /// What it checks.
    pub description: String,
    /// The least contract version the case needs, if any.
    pub contract: Option<String>,
    /// What the policy must answer.
    pub expect: Expect,
    text: String,
}

/// The `description`, `contract` and `expect` fields of a case.
#[derive(Debug, Deserialize)]
struct CaseMeta {
    #[serde(default)]
    description: String,
    #[serde(default)]
    contract: Option<String>,
    expect: Expect,
}

/// What a case expects.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Verdicts: all of them in order, or (with `counts`) some by id.
    #[serde(default)]
    pub verdicts: Vec<ExpectedVerdict>,
    /// Verdicts per rule.
    pub counts: Option<BTreeMap<String, usize>>,
    /// Every log line, if given.
    pub logs: Option<Vec<ExpectedLog>>,
    /// The policy must refuse the request.
    pub error: Option<ExpectedError>,
}

/// One expected verdict.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedVerdict {
    /// The lock.
    pub id: String,
    /// `keep` or `remove`.
    pub action: String,
    /// The rule that decided.
    pub rule: String,
    /// Text the reason must contain.
    #[serde(default)]
    pub reason_contains: Vec<String>,
}

/// One expected log line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedLog {
    /// `debug`, `info`, `warn` or `error`.
    pub level: String,
    /// Text the message must contain.
    pub contains: String,
}

/// An expected refusal.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedError {
    /// `invalid-setting` or `failed`.
    pub kind: String,
    /// Text the message must contain.
    #[serde(default)]
    pub contains: String,
}

/// Why the conformance cases cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CasesError {
    /// The directory cannot be listed.
    #[error("cannot read conformance cases in {}: {cause}", .dir.display())]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// The directory holds no `*.json` file.
    #[error("no *.json cases in {}", .dir.display())]
    NoCases {
        /// The directory.
        dir: PathBuf,
    },
    /// One case file is refused.
    #[error("case {}: {fault}", .path.display())]
    Case {
        /// The case file.
        path: PathBuf,
        /// What is wrong with it.
        fault: CaseFault,
    },
}

/// What is wrong with one case file.
#[derive(Debug, thiserror::Error)]
pub enum CaseFault {
    /// It cannot be read (not a regular file, too large, ...).
    #[error("it {0}")]
    Read(crate::files::ReadError),
    /// It is not UTF-8.
    #[error("it is not UTF-8 text")]
    NotUtf8,
    /// It is no case.
    #[error("{0}")]
    Json(serde_json::Error),
    /// Its `contract` is no version.
    #[error(
        "`contract` is `{}`, not a version such as `0.2.0`",
        crate::text::escape(.0)
    )]
    Contract(String),
}

/// Why a case could not be run (beside any verdict it expected).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Its request is not a valid recorded request.
    #[error("case {case}: the request is not valid: {cause}")]
    Request {
        /// The case's name.
        case: String,
        /// What is wrong with the request.
        cause: crate::request::RequestError,
    },
    /// The policy itself failed (a trap, a limit).
    #[error("case {case}: {cause}")]
    Plugin {
        /// The case's name.
        case: String,
        /// How the plugin failed.
        cause: PluginError,
    },
}

/// Reads every `*.json` case in `dir`, in name order.
pub fn load_dir(dir: &Path) -> Result<Vec<Case>, CasesError> {
    let entries = std::fs::read_dir(dir).map_err(|cause| CasesError::Dir {
        dir: dir.to_owned(),
        cause,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(CasesError::NoCases {
            dir: dir.to_owned(),
        });
    }
    paths.into_iter().map(|path| load(&path)).collect()
}

/// Reads one case file.
pub fn load(path: &Path) -> Result<Case, CasesError> {
    let fail = |fault: CaseFault| CasesError::Case {
        path: path.to_owned(),
        fault,
    };
    let bytes = crate::files::read_regular_file(path, crate::limits::REQUEST)
        .map_err(|e| fail(CaseFault::Read(e)))?;
    let text = String::from_utf8(bytes).map_err(|_| fail(CaseFault::NotUtf8))?;
    let meta: CaseMeta = serde_json::from_str(&text).map_err(|e| fail(CaseFault::Json(e)))?;
    if let Some(contract) = &meta.contract
        && version_key(contract).is_none()
    {
        return Err(fail(CaseFault::Contract(contract.clone())));
    }
    Ok(Case {
        name: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        description: meta.description,
        contract: meta.contract,
        expect: meta.expect,
        text,
    })
}

/// `major.minor.patch` as numbers, for ordering contract versions.
fn version_key(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().ok());
    let key = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(key)
}

/// What running one case gave.
#[derive(Debug)]
pub enum CaseResult {
    /// The case needs facts of a newer contract than the policy implements.
    Skipped {
        /// The contract version the case needs.
        needs: String,
    },
    /// The case ran: what the policy answered, and each difference from
    /// what the case expects (none when it passed).
    Ran {
        /// What the policy answered, or `{"host_error": ...}`.
        observed: Value,
        /// One line per difference.
        problems: Vec<String>,
    },
}

/// Every case of a suite with what running it gave, in the suite's order.
#[derive(Debug)]
pub struct SuiteRun<'a> {
    /// The contract version the policy implements.
    pub contract: &'static str,
    /// Each case and its result.
    pub results: Vec<(&'a Case, CaseResult)>,
}

impl SuiteRun<'_> {
    /// How many cases ran and passed.
    pub fn passed(&self) -> usize {
        self.count(|r| matches!(r, CaseResult::Ran { problems, .. } if problems.is_empty()))
    }

    /// How many cases ran and failed.
    pub fn failed(&self) -> usize {
        self.count(|r| matches!(r, CaseResult::Ran { problems, .. } if !problems.is_empty()))
    }

    /// How many cases were skipped because they need a newer contract.
    pub fn skipped(&self) -> usize {
        self.count(|r| matches!(r, CaseResult::Skipped { .. }))
    }

    fn count(&self, which: impl Fn(&CaseResult) -> bool) -> usize {
        self.results.iter().filter(|(_, r)| which(r)).count()
    }
}

/// Runs every case through `policy`, skipping those that need a newer
/// contract than the one it implements ([`Policy::contract`]).
pub fn run_suite<'a>(cases: &'a [Case], runtime: &Runtime, policy: &Policy) -> SuiteRun<'a> {
    let contract = policy.contract();
    let results = cases
        .iter()
        .map(|case| {
            let result = match case.needs_newer_than(contract) {
                Some(needs) => CaseResult::Skipped {
                    needs: needs.to_owned(),
                },
                None => match case.run(runtime, policy) {
                    Ok(observed) => CaseResult::Ran {
                        problems: case.check(&observed),
                        observed,
                    },
                    Err(e) => CaseResult::Ran {
                        observed: json!({"host_error": e.to_string()}),
                        problems: vec![e.to_string()],
                    },
                },
            };
            (case, result)
        })
        .collect();
    SuiteRun { contract, results }
}

impl Case {
    /// The contract version this case needs, when that is newer than
    /// `contract` (the version a policy implements); `None` when the case
    /// applies. A version that does not parse counts as newer.
    pub fn needs_newer_than(&self, contract: &str) -> Option<&str> {
        let needs = self.contract.as_deref()?;
        match (version_key(needs), version_key(contract)) {
            (Some(needs_key), Some(has)) if needs_key <= has => None,
            _ => Some(needs),
        }
    }

    /// Runs the case's request through `policy` and returns what it answered
    /// in the host-neutral form [`observed_json`] describes.
    pub fn run(&self, runtime: &Runtime, policy: &Policy) -> Result<Value, RunError> {
        let prepared = Prepared::from_json(&self.text).map_err(|cause| RunError::Request {
            case: self.name.clone(),
            cause,
        })?;
        let result = runtime.evaluate(
            policy,
            prepared.now,
            Arc::new(prepared.evidence),
            &prepared.request,
        );
        observed_json(&prepared.request, result).map_err(|cause| RunError::Plugin {
            case: self.name.clone(),
            cause,
        })
    }

    /// Compares what a host observed with what the case expects; one line per
    /// difference.
    pub fn check(&self, observed: &Value) -> Vec<String> {
        check(&self.expect, observed)
    }
}

/// What a policy answered, as every host reports it:
/// `{"verdicts": [{"id", "action", "rule", "reason"}], "logs": [{"level",
/// "message"}]}`, or `{"error": {"kind", "message"}}` when the policy refused
/// the request. Failures of the plugin itself (traps, limits) are errors.
pub fn observed_json(
    request: &EvaluateRequest,
    result: Result<Outcome, PluginError>,
) -> Result<Value, PluginError> {
    match result {
        Ok(outcome) => Ok(json!({
            "verdicts": crate::report::verdicts_json(request, &outcome.verdicts),
            "logs": outcome.logs.iter().map(|l| json!({
                "level": l.level.name(),
                "message": l.message,
            })).collect::<Vec<_>>(),
        })),
        Err(PluginError::Refused { error, .. }) => {
            let (kind, message) = match error {
                PolicyError::InvalidSetting(m) => ("invalid-setting", m),
                PolicyError::Failed(m) => ("failed", m),
            };
            Ok(json!({"error": {"kind": kind, "message": message}}))
        }
        Err(other) => Err(other),
    }
}

fn check(expect: &Expect, observed: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(error) = &expect.error {
        check_refusal(error, &observed["error"], &mut problems);
        return problems;
    }
    let Some(verdicts) = observed["verdicts"].as_array() else {
        return vec![format!("expected verdicts, got {observed}")];
    };
    match &expect.counts {
        None => check_verdicts_in_order(&expect.verdicts, verdicts, &mut problems),
        Some(counts) => check_verdicts_by_id(&expect.verdicts, counts, verdicts, &mut problems),
    }
    if let Some(logs) = &expect.logs {
        check_logs(logs, &observed["logs"], &mut problems);
    }
    problems
}

/// The string at `key` of `v`, empty when there is none.
fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

/// The policy must have refused with `expected`; `got` is the observed
/// `error`.
fn check_refusal(expected: &ExpectedError, got: &Value, problems: &mut Vec<String>) {
    if got.is_null() {
        problems.push(format!(
            "expected the policy to refuse with {}, but it answered",
            expected.kind
        ));
    } else if text(got, "kind") != expected.kind
        || !text(got, "message").contains(&expected.contains)
    {
        problems.push(format!(
            "expected refusal {} containing {:?}, got {} {:?}",
            expected.kind,
            expected.contains,
            text(got, "kind"),
            text(got, "message")
        ));
    }
}

/// Without `counts`: `expected` is every verdict, in order.
fn check_verdicts_in_order(
    expected: &[ExpectedVerdict],
    verdicts: &[Value],
    problems: &mut Vec<String>,
) {
    if verdicts.len() != expected.len() {
        problems.push(format!(
            "expected {} verdicts, got {}",
            expected.len(),
            verdicts.len()
        ));
    }
    for (expected, got) in expected.iter().zip(verdicts) {
        if text(got, "id") != expected.id {
            problems.push(format!(
                "expected a verdict on {} here, got one on {}",
                expected.id,
                text(got, "id")
            ));
            continue;
        }
        check_verdict(expected, got, problems);
    }
}

/// With `counts`: each of `expected` is looked up by id, and `counts` is the
/// number of verdicts per rule.
fn check_verdicts_by_id(
    expected: &[ExpectedVerdict],
    counts: &BTreeMap<String, usize>,
    verdicts: &[Value],
    problems: &mut Vec<String>,
) {
    let by_id: BTreeMap<String, &Value> = verdicts.iter().map(|v| (text(v, "id"), v)).collect();
    for expected in expected {
        match by_id.get(&expected.id) {
            Some(got) => check_verdict(expected, got, problems),
            None => problems.push(format!("no verdict on {}", expected.id)),
        }
    }
    let mut got_counts: BTreeMap<String, usize> = BTreeMap::new();
    for v in verdicts {
        *got_counts.entry(text(v, "rule")).or_default() += 1;
    }
    if &got_counts != counts {
        problems.push(format!(
            "expected verdicts per rule {counts:?}, got {got_counts:?}"
        ));
    }
}

/// One verdict on the lock `expected` names: its action, rule and reason.
fn check_verdict(expected: &ExpectedVerdict, got: &Value, problems: &mut Vec<String>) {
    let reason = text(got, "reason");
    if text(got, "action") != expected.action || text(got, "rule") != expected.rule {
        problems.push(format!(
            "lock {}: expected {} by {}, got {} by {} ({reason})",
            expected.id,
            expected.action,
            expected.rule,
            text(got, "action"),
            text(got, "rule")
        ));
    }
    for part in &expected.reason_contains {
        if !reason.contains(part) {
            problems.push(format!(
                "lock {}: reason {reason:?} does not contain {part:?}",
                expected.id
            ));
        }
    }
}

/// `expected` is every log line; `got` is the observed `logs`.
fn check_logs(expected: &[ExpectedLog], got: &Value, problems: &mut Vec<String>) {
    let got = got.as_array().map(Vec::as_slice).unwrap_or(&[]);
    if got.len() != expected.len() {
        problems.push(format!(
            "expected {} log lines, got {}: {got:?}",
            expected.len(),
            got.len()
        ));
    }
    for (expected, line) in expected.iter().zip(got) {
        if text(line, "level") != expected.level
            || !text(line, "message").contains(&expected.contains)
        {
            problems.push(format!(
                "expected a {} log containing {:?}, got {line}",
                expected.level, expected.contains
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case_needing(contract: Option<&str>) -> Case {
        Case {
            name: "c".into(),
            description: String::new(),
            contract: contract.map(str::to_owned),
            expect: Expect::default(),
            text: String::new(),
        }
    }

    #[test]
    fn a_case_is_skipped_only_for_an_older_contract() {
        let any = case_needing(None);
        assert_eq!(any.needs_newer_than("0.1.0"), None);
        let new = case_needing(Some("0.2.0"));
        assert_eq!(new.needs_newer_than("0.1.0"), Some("0.2.0"));
        assert_eq!(new.needs_newer_than("0.2.0"), None);
        assert_eq!(new.needs_newer_than("0.2.1"), None);
        assert_eq!(new.needs_newer_than("0.10.0"), None, "numbers, not text");
        assert_eq!(new.needs_newer_than("1.0.0"), None);
        assert_eq!(
            case_needing(Some("0.10.0")).needs_newer_than("0.9.0"),
            Some("0.10.0")
        );
        assert_eq!(version_key("0.2"), None);
        assert_eq!(version_key("0.2.0.1"), None);
        assert_eq!(version_key("0.x.0"), None);
    }

    #[test]
    fn a_case_with_a_malformed_contract_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("bad.json");
        std::fs::write(&path, r#"{"contract": "two", "expect": {}}"#).expect("write");
        let err = load(&path).expect_err("refused");
        assert!(matches!(
            err,
            CasesError::Case {
                fault: CaseFault::Contract(_),
                ..
            }
        ));
        let err = err.to_string();
        assert!(err.contains("`contract` is `two`, not a version"), "{err}");
        assert_eq!(
            err,
            format!(
                "case {}: `contract` is `two`, not a version such as `0.2.0`",
                path.display()
            )
        );
    }

    fn problems(expect: Value, observed: Value) -> Vec<String> {
        let expect: Expect = serde_json::from_value(expect).expect("an expectation");
        check(&expect, &observed)
    }

    fn verdict(id: &str, action: &str, rule: &str, reason: &str) -> Value {
        json!({"id": id, "action": action, "rule": rule, "reason": reason})
    }

    #[test]
    fn a_refusal_must_come_with_its_kind_and_text() {
        let expect = json!({"error": {"kind": "invalid-setting", "contains": "stale-after"}});
        let refused =
            |kind: &str, message: &str| json!({"error": {"kind": kind, "message": message}});
        assert_eq!(
            problems(
                expect.clone(),
                refused("invalid-setting", "bad stale-after: 3")
            ),
            Vec::<String>::new()
        );
        assert_eq!(
            problems(expect.clone(), json!({"verdicts": [], "logs": []})),
            ["expected the policy to refuse with invalid-setting, but it answered"]
        );
        assert_eq!(
            problems(expect, refused("failed", "boom")),
            [r#"expected refusal invalid-setting containing "stale-after", got failed "boom""#]
        );
    }

    #[test]
    fn without_counts_every_verdict_is_listed_in_order() {
        let expect = json!({"verdicts": [
            {"id": "a", "action": "remove", "rule": "expired", "reason_contains": ["30m", "old"]},
            {"id": "b", "action": "keep", "rule": "fresh"},
            {"id": "c", "action": "keep", "rule": "fresh"},
        ]});
        let observed = json!({"verdicts": [
            verdict("a", "keep", "fresh", "30m young"),
            verdict("c", "keep", "fresh", ""),
        ]});
        assert_eq!(
            problems(expect, observed),
            [
                "expected 3 verdicts, got 2",
                "lock a: expected remove by expired, got keep by fresh (30m young)",
                r#"lock a: reason "30m young" does not contain "old""#,
                "expected a verdict on b here, got one on c",
            ]
        );
        assert_eq!(
            problems(json!({}), json!({"error": {"kind": "failed"}})),
            [r#"expected verdicts, got {"error":{"kind":"failed"}}"#]
        );
    }

    #[test]
    fn with_counts_verdicts_are_found_by_id_and_counted_per_rule() {
        let expect = json!({
            "verdicts": [
                {"id": "a", "action": "remove", "rule": "expired"},
                {"id": "z", "action": "keep", "rule": "fresh"},
            ],
            "counts": {"expired": 2},
        });
        let observed = json!({"verdicts": [
            verdict("b", "keep", "fresh", ""),
            verdict("a", "remove", "expired", ""),
        ]});
        assert_eq!(
            problems(expect, observed),
            [
                "no verdict on z",
                r#"expected verdicts per rule {"expired": 2}, got {"expired": 1, "fresh": 1}"#,
            ]
        );
    }

    #[test]
    fn logs_are_every_line_in_order() {
        let expect = json!({"logs": [
            {"level": "warn", "contains": "has not refreshed"},
            {"level": "info", "contains": "done"},
        ]});
        let observed = json!({"verdicts": [], "logs": [
            {"level": "info", "message": "lock a has not refreshed"},
        ]});
        assert_eq!(
            problems(expect.clone(), observed),
            [
                r#"expected 2 log lines, got 1: [Object {"level": String("info"), "message": String("lock a has not refreshed")}]"#,
                r#"expected a warn log containing "has not refreshed", got {"level":"info","message":"lock a has not refreshed"}"#,
            ]
        );
        assert_eq!(
            problems(expect, json!({"verdicts": []})),
            ["expected 2 log lines, got 0: []"]
        );
    }
}
