//! Which server the tests run on: the Debian redis-server by default, or
//! the binary RLOCK_TEST_REDIS_SERVER names (scripts/compat.sh).

use crate::util::*;

/// Every server a test starts runs the chosen binary: what it reports
/// in INFO is what that binary says it is.
#[test]
fn the_server_under_test_is_the_chosen_binary() {
    let (name, version) = server_version();
    let r = Redis::start();
    let info: String = r.cmd(&["INFO", "server"]);
    let field = if name == "Valkey" {
        "valkey_version"
    } else {
        "redis_version"
    };
    assert!(
        info.lines()
            .any(|l| l.trim() == format!("{field}:{version}")),
        "{} --version says {name} {version}; INFO says:\n{info}",
        server_bin()
    );
    eprintln!("server under test: {name} {version} ({})", server_bin());
}
