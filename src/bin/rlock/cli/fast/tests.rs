use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use clap::Parser;

use super::{DECLINED_ENV, TAKEN_ENV, exec};
use crate::cli::Cli;
use crate::cli::tests::outcome;

/// The environments the lines are read in: (variables, whether the fast
/// path may answer in it).
const ENVIRONMENTS: &[(&[(&str, &str)], bool)] = &[
    (&[], true),
    (&[("RLOCK_URL", "redis://10.0.0.7:6380/2")], true),
    (
        &[("RLOCK_URL", "redis://a:1,rediss://b:2,unix:///run/r.sock")],
        true,
    ),
    (&[("RLOCK_PREFIX", "app:")], true),
    (
        &[("RLOCK_URL", "redis://h:1"), ("RLOCK_PREFIX", "{x}:")],
        true,
    ),
    (&[("RLOCK_URL", "")], false),
    (&[("RLOCK_URL", "redis://a:1,,redis://b:2")], false),
    (&[("RLOCK_URL", "redis://a:1,")], false),
    (&[("RLOCK_PREFIX", "")], false),
    (&[("RLOCK_CLUSTER", "1")], false),
    (&[("RLOCK_CLUSTER", "0")], false),
    (&[("RLOCK_CLUSTER", "")], false),
    (&[("RLOCK_SENTINEL", "mymaster")], false),
    (&[("RLOCK_MIN_REPLICAS", "1")], false),
    (&[("RLOCK_TLS_CA", "/nowhere/ca.pem")], false),
    (&[("RLOCK_TLS_CERT", "/nowhere/c.pem")], false),
    (&[("RLOCK_TLS_KEY", "/nowhere/k.pem")], false),
    (&[("RLOCK_HISTORY_EVENTS", "0")], false),
    (&[("RLOCK_HISTORY_RETENTION", "1d")], false),
];

/// The words lines are made of: the options the fast path takes, in every
/// form, their values good and bad, and words it must leave to clap.
fn words() -> Vec<OsString> {
    // `|` separates them: some have spaces, one is empty.
    let mut w: Vec<OsString> = "-n|--no-wait|--nb|-q|--quiet|-v|--verbose|-w|--wait|--timeout|\
        -w5|--wait=5|5|0|0.5|.5|1e3|-1|5s|1h30m|soon| 5|--ttl|--ttl=5s|30s|0s|2m|-E|-E0|0|75|\
        255|256|+7|007|k|key:with/odd chars|ü||--|--|--|-k|true|sh|-c|echo|--and|j|-x|-s|-nv|\
        --url|redis://x:1|--prefix|p:|exec|help|--help|-h|--max-hold|--on-lost|kill"
        .split('|')
        .map(OsString::from)
        .collect();
    w.push(OsString::from_vec(vec![b'k', 0xff]));
    w
}

/// A small deterministic generator (xorshift64*), so that a failure
/// names a line that comes back on the next run.
struct Words {
    state: u64,
    pool: Vec<OsString>,
}

impl Words {
    fn pick(&mut self, n: usize) -> usize {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let x = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        usize::try_from(x >> 33).unwrap() % n
    }

    /// `rlock exec` and up to eight words, often shaped like the usual line.
    fn line(&mut self) -> Vec<OsString> {
        let mut line: Vec<OsString> = vec!["rlock".into(), "exec".into()];
        let n = self.pick(9);
        for i in 0..n {
            // Lean towards `... KEY -- CMD`: more lines reach the end.
            let w = match (n - i, self.pick(3)) {
                (2, 0) => OsString::from("--"),
                (3, 0) => OsString::from("k"),
                _ => {
                    let w = self.pick(self.pool.len());
                    self.pool[w].clone()
                }
            };
            line.push(w);
        }
        line
    }
}

/// The lines every environment reads: the usual ones, then generated ones.
fn lines() -> Vec<Vec<OsString>> {
    let mut lines: Vec<Vec<OsString>> = [
        "rlock exec k -- true",
        "rlock exec -n -E 0 nightly -- ./report.sh",
        "rlock exec --ttl 2m -w 10m deploy -- make deploy",
        "rlock exec -w 0.5 -q k -- sh -c true",
        "rlock exec -v --no-wait k -- true -- x",
        "rlock exec -E 256 k -- true",
        "rlock exec -n -n k -- true",
        "rlock exec -q -v k -- true",
        "rlock exec k true",
        "rlock exec k --",
        "rlock exec -- k true",
        "rlock exec k -n -- true",
    ]
    .iter()
    .map(|l| l.split(' ').map(OsString::from).collect())
    .collect();
    let mut generator = Words {
        state: 0x9e37_79b9_7f4a_7c15,
        pool: words(),
    };
    lines.extend((0..4000).map(|_| generator.line()));
    lines
}

/// Every line the fast path answers for, in the environment this process
/// has, parses to the same value as with clap; returns how many it
/// answered for.
fn check_lines() -> usize {
    let mut answered = 0;
    for args in lines() {
        if let Some(fast) = exec(&args) {
            answered += 1;
            assert_eq!(
                outcome(Ok(fast)),
                outcome(<Cli>::try_parse_from(&args)),
                "{args:?}"
            );
        }
    }
    answered
}

/// The fast path reads every line it answers for as clap does, in each
/// environment (each in a process of its own: clap reads the process's
/// environment), and answers for the usual line where it may.
#[test]
fn agrees_with_clap_in_every_environment() {
    const NAME: &str = "cli::fast::tests::agrees_with_clap_in_every_environment";
    if let Some(i) = std::env::var_os("RLOCK_FAST_TEST_ENVIRONMENT") {
        let i: usize = i.to_str().unwrap().parse().unwrap();
        let may = ENVIRONMENTS[i].1;
        let usual: Vec<OsString> = ["rlock", "exec", "k", "--", "true"]
            .map(OsString::from)
            .to_vec();
        assert_eq!(exec(&usual).is_some(), may, "the usual line");
        let answered = check_lines();
        if may {
            // The usual lines above, and some of the generated ones.
            assert!(answered > 20, "answered for {answered} lines only");
        } else {
            assert_eq!(answered, 0);
        }
        println!("environment {i}: the fast path answered for {answered} lines");
        return;
    }
    for (i, (vars, _)) in ENVIRONMENTS.iter().enumerate() {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child.args(["--exact", NAME, "--nocapture", "--test-threads=1"]);
        for v in TAKEN_ENV.iter().chain(&DECLINED_ENV) {
            child.env_remove(v);
        }
        child.envs(vars.iter().copied());
        child.env("RLOCK_FAST_TEST_ENVIRONMENT", i.to_string());
        let out = child.output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.contains(&format!("environment {i}: the fast path")),
            "environment {i} {vars:?}:\n{said}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The fast path knows every environment variable clap reads for `exec`:
/// one added to the declaration must be taken or declined here.
#[test]
fn knows_every_variable_clap_reads() {
    let mut cmd = crate::cli::command_of("exec").unwrap();
    cmd.build();
    let sub = cmd.find_subcommand("exec").unwrap();
    let read: BTreeSet<String> = sub
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_str().unwrap().to_owned())
        .collect();
    let known: BTreeSet<String> = TAKEN_ENV
        .iter()
        .chain(&DECLINED_ENV)
        .map(|v| (*v).to_owned())
        .collect();
    assert_eq!(read, known);
}
