//! What `rlock status` shows of each kind of command line.

use super::*;

fn cmd(args: &[&str]) -> String {
    redact_command(&args.iter().map(OsString::from).collect::<Vec<_>>())
}

#[test]
fn harmless_commands_are_unchanged() {
    for c in [
        &["make", "deploy"][..],
        &["./job", "--limit=3", "FOO=bar", "-v"],
        &["redis-cli", "-h", "h", "-p", "6379", "--askpass", "ping"],
        &["cp", "-a", "src", "dst"],
        &["ssh", "deploy@web1", "./x"],
        &["git", "clone", "git@github.com:o/r.git"],
        &["docker", "pull", "img@sha256:abc"],
        &["curl", "https://example.com/a", "-H", "Accept: text/plain"],
        &["sh", "-c", "sleep 1;  echo\tdone"],
        &[
            "tool",
            "--bypass",
            "x",
            "--no-password",
            "y",
            "--password-file",
            "/p",
        ],
        &["tool", "--oauth", "x", "--key", "k"],
        &[],
    ] {
        assert_eq!(cmd(c), c.join(" "));
    }
    use std::os::unix::ffi::OsStringExt;
    let odd = OsString::from_vec(b"caf\xe9".to_vec());
    assert_eq!(redact_command(&["echo".into(), odd]), "echo caf\u{fffd}");
}

#[test]
fn hides_urls_passwords() {
    assert_eq!(
        cmd(&["redis-cli", "-u", "redis://user:secret@h:6379/0", "ping"]),
        "redis-cli -u redis://***@h:6379/0 ping"
    );
    assert_eq!(
        cmd(&["./job", "--url=redis://u:p@h", "x"]),
        "./job --url=redis://***@h x"
    );
    assert_eq!(
        cmd(&["job", "unix:///s.sock?pass=hunter2"]),
        "job unix:///s.sock?***"
    );
    assert_eq!(
        cmd(&["curl", "--proxy", "user:hunter2@proxy:3128", "x"]),
        "curl --proxy ***@proxy:3128 x"
    );
}

#[test]
fn hides_secret_assignments() {
    assert_eq!(
        cmd(&["env", "RLOCK_PASSWORD=hunter2", "./job"]),
        "env RLOCK_PASSWORD=*** ./job"
    );
    for name in [
        "PGPASSWORD",
        "db_passwd",
        "PASS",
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "BASIC_AUTH",
        "GOOGLE_CREDENTIALS",
        "APIKEY",
        "x_api_key",
        "PRIVATE_KEY",
        "--password",
        "--api-key",
        "-token",
    ] {
        assert_eq!(
            cmd(&["env", &format!("{name}=hunter2"), "x"]),
            format!("env {name}=*** x")
        );
    }
    // The whole value of one argument, spaces and all.
    assert_eq!(
        cmd(&["env", "PASSWORD=two words", "x"]),
        "env PASSWORD=*** x"
    );
}

#[test]
fn hides_the_argument_after_a_secret_flag() {
    for flag in [
        "--password",
        "--pass",
        "--token",
        "--secret",
        "--auth",
        "--db-password",
        "--client_secret",
        "--access-token",
        "--x-api-key",
        "--basic-auth",
        "--requirepass",
        "--masterauth",
        "-passin",
        "-Password",
    ] {
        assert_eq!(
            cmd(&["tool", flag, "hunter 2", "ping"]),
            format!("tool {flag} *** ping")
        );
    }
    assert_eq!(
        cmd(&["redis-cli", "-a", "hunter2", "-p", "6380", "ping"]),
        "redis-cli -a *** -p 6380 ping"
    );
    assert_eq!(
        cmd(&["timeout", "5", "/usr/bin/redis-cli", "-a", "hunter2"]),
        "timeout 5 /usr/bin/redis-cli -a ***"
    );
    // The flag last: nothing to hide, nothing lost.
    assert_eq!(cmd(&["tool", "--token"]), "tool --token");
}

#[test]
fn hides_authorization_headers() {
    assert_eq!(
        cmd(&["curl", "-H", "Authorization: Bearer abc", "u"]),
        "curl -H Authorization: *** u"
    );
    assert_eq!(
        cmd(&["curl", "-H", "X-Api-Key: abc", "u"]),
        "curl -H X-Api-Key: *** u"
    );
}

#[test]
fn reads_shell_commands_word_by_word() {
    assert_eq!(
        cmd(&[
            "sh",
            "-c",
            "PGPASSWORD=hunter2 psql; redis-cli -a hunter2 ping && \
             curl -H 'Authorization: Bearer abc' https://u:hunter2@h/x"
        ]),
        "sh -c PGPASSWORD=*** psql; redis-cli -a *** ping && \
         curl -H 'Authorization: *** *** https://***@h/x"
    );
    assert_eq!(
        cmd(&["bash", "-lc", "export FOO=1 TOKEN=abc; ./job --secret s"]),
        "bash -lc export FOO=1 TOKEN=*** ./job --secret ***"
    );
    // Not after -c: one assignment, hidden whole.
    assert_eq!(
        cmd(&["ssh", "h", "PGPASSWORD=x psql"]),
        "ssh h PGPASSWORD=***"
    );
    // Errs on the side of hiding.
    assert_eq!(cmd(&["env", "AUTHOR=Ann", "x"]), "env AUTHOR=*** x");
}

#[test]
fn cuts_long_lines_after_redacting() {
    let long = "x".repeat(185);
    let line = cmd(&[&long, "redis://u:hunter2@host", "y"]);
    // Cut first, it would have ended in "redis://u:hunt".
    assert_eq!(line, format!("{long} redis://***@ho..."));
    assert_eq!(line.chars().count(), 203);
    let short = cmd(&[&"é".repeat(200)]);
    assert_eq!(short, "é".repeat(200));
    assert_eq!(cmd(&[&"é".repeat(201)]), format!("{}...", "é".repeat(200)));
}

#[test]
fn url_encoded_and_raw_special_characters_in_passwords() {
    for url in [
        "redis://u:p%40ss%3Aw%2Frd@h:1",
        "redis://u:p@ss@h:1",
        "redis://u:p/a?s#s@h:1",
        "redis://u%40corp:pw@h:1",
    ] {
        assert_eq!(redact(url), "redis://***@h:1", "{url}");
        assert_eq!(cmd(&["rlock", "--url", url]), "rlock --url redis://***@h:1");
    }
}

#[test]
fn rlocks_own_url_flag() {
    assert_eq!(
        cmd(&[
            "rlock",
            "--url",
            "redis://u:hunter2@h:6379/0",
            "exec",
            "k",
            "--",
            "x"
        ]),
        "rlock --url redis://***@h:6379/0 exec k -- x"
    );
    assert_eq!(
        cmd(&["rlock", "--url=rediss://:hunter2@h", "status", "k"]),
        "rlock --url=rediss://***@h status k"
    );
    // Several URLs in one value, as RLOCK_URL takes them: everything up
    // to the last `@` counts as credentials, so no password shows.
    assert_eq!(
        cmd(&["env", "RLOCK_URL=redis://:pw1@a,redis://:pw2@b", "x"]),
        "env RLOCK_URL=redis://***@b x"
    );
}

#[test]
fn redis_cli_passwords() {
    assert_eq!(
        cmd(&["redis-cli", "--user", "u", "--pass", "hunter2", "ping"]),
        "redis-cli --user u --pass *** ping"
    );
    assert_eq!(
        cmd(&["env", "REDISCLI_AUTH=hunter2", "redis-cli", "ping"]),
        "env REDISCLI_AUTH=*** redis-cli ping"
    );
    assert_eq!(
        cmd(&["valkey-cli", "-a", "hunter2", "--no-auth-warning"]),
        "valkey-cli -a *** --no-auth-warning"
    );
    // -a before any redis-cli is not a password.
    assert_eq!(cmd(&["cp", "-a", "x", "redis-cli"]), "cp -a x redis-cli");
}

#[test]
fn mysql_and_sshpass_passwords_glued_to_p() {
    assert_eq!(
        cmd(&["mysql", "-u", "root", "-phunter2", "db"]),
        "mysql -u root -p*** db"
    );
    assert_eq!(
        cmd(&["/usr/bin/mysqldump", "-phunter2", "--all-databases"]),
        "/usr/bin/mysqldump -p*** --all-databases"
    );
    assert_eq!(
        cmd(&["sh", "-c", "mariadb -phunter2 -e 'select 1'"]),
        "sh -c mariadb -p*** -e 'select 1'"
    );
    assert_eq!(
        cmd(&["sshpass", "-p", "hunter2", "ssh", "h"]),
        "sshpass -p *** ssh h"
    );
    assert_eq!(
        cmd(&["sshpass", "-phunter2", "ssh", "h"]),
        "sshpass -p*** ssh h"
    );
    // mysql's `-p db` prompts for the password: db is a database; and
    // -p of other programs is no password.
    assert_eq!(cmd(&["mysql", "-p", "db"]), "mysql -p db");
    assert_eq!(cmd(&["mkdir", "-pv", "d"]), "mkdir -pv d");
    assert_eq!(
        cmd(&["mysql", "-P3306", "--port=3306"]),
        "mysql -P3306 --port=3306"
    );
}

#[test]
fn secrets_in_env_style_assignments() {
    for (arg, shown) in [
        ("REDIS_PASSWORD=hunter2", "REDIS_PASSWORD=***"),
        ("password=hunter2", "password=***"),
        ("--requirepass=hunter2", "--requirepass=***"),
        ("--masterauth=hunter2", "--masterauth=***"),
        ("RLOCK_TOKEN=0f1e2d3c", "RLOCK_TOKEN=***"),
        ("RLOCK_URL=redis://u:hunter2@h", "RLOCK_URL=redis://***@h"),
        (
            "REDIS_URL=rediss://:hunter2@h:1/0",
            "REDIS_URL=rediss://***@h:1/0",
        ),
        ("PROXY=user:hunter2@proxy:3128", "PROXY=***@proxy:3128"),
        ("LEVEL=3", "LEVEL=3"),
    ] {
        assert_eq!(
            cmd(&["docker", "run", "-e", arg, "img"]),
            format!("docker run -e {shown} img"),
            "{arg}"
        );
    }
}

#[test]
fn hides_the_credentials_of_redis_commands() {
    for (argv, shown) in [
        (&["redis-cli", "AUTH", "hunter2"][..], "redis-cli AUTH ***"),
        (
            &["redis-cli", "-h", "h", "auth", "alice", "hunter2"],
            "redis-cli -h h auth *** ***",
        ),
        (
            &["redis-cli", "HELLO", "3", "AUTH", "alice", "hunter2"],
            "redis-cli HELLO 3 AUTH *** ***",
        ),
        (
            &[
                "redis-cli",
                "MIGRATE",
                "h",
                "6379",
                "",
                "0",
                "5000",
                "AUTH2",
                "u",
                "pw",
                "KEYS",
                "k",
            ],
            "redis-cli MIGRATE h 6379  0 5000 AUTH2 *** *** *** ***",
        ),
        (
            &["redis-cli", "CONFIG", "SET", "masterauth", "hunter2"],
            "redis-cli CONFIG SET masterauth ***",
        ),
        (
            &[
                "/usr/bin/valkey-cli",
                "config",
                "set",
                "requirepass",
                "hunter2",
            ],
            "/usr/bin/valkey-cli config set requirepass ***",
        ),
        (
            &["sh", "-c", "redis-cli AUTH hunter2 && redis-cli ping"],
            "sh -c redis-cli AUTH *** *** *** ***",
        ),
    ] {
        assert_eq!(cmd(argv), shown);
    }
    // Not a redis-cli: AUTH is only a word.
    assert_eq!(cmd(&["./deploy", "auth", "check"]), "./deploy auth check");
    assert_eq!(cmd(&["redis-cli", "ping"]), "redis-cli ping");
}

#[test]
fn curl_user_passwords() {
    assert_eq!(
        cmd(&["curl", "-u", "admin:hunter2", "https://h/x"]),
        "curl -u admin:*** https://h/x"
    );
    assert_eq!(
        cmd(&["curl", "--user", "admin:hunter2", "https://h/x"]),
        "curl --user admin:*** https://h/x"
    );
    assert_eq!(
        cmd(&[
            "curl",
            "--user=admin:hunter2",
            "-uadmin:hunter2",
            "-U",
            "p:hunter2"
        ]),
        "curl --user=admin:*** -uadmin:*** -U p:***"
    );
    // A user name alone: curl asks for the password.
    assert_eq!(cmd(&["curl", "-u", "admin", "u"]), "curl -u admin u");
    // Not after curl: docker's user:group is no password.
    assert_eq!(
        cmd(&["docker", "run", "-u", "www-data:www-data", "img"]),
        "docker run -u www-data:www-data img"
    );
}

#[test]
fn authorization_header_without_a_space() {
    assert_eq!(
        cmd(&["curl", "-H", "Authorization:Bearer hunter2", "u"]),
        "curl -H Authorization:*** u"
    );
    assert_eq!(
        cmd(&["curl", "-H", "X-Api-Key:hunter2", "u"]),
        "curl -H X-Api-Key:*** u"
    );
    assert_eq!(
        cmd(&["sh", "-c", "curl -H 'Authorization:Bearer hunter2' u"]),
        "sh -c curl -H 'Authorization:*** *** u"
    );
    // host:port with a name that only contains AUTH is left alone.
    assert_eq!(cmd(&["nc", "auth-server:443"]), "nc auth-server:443");
}

#[test]
fn cookie_headers() {
    assert_eq!(
        cmd(&["curl", "-H", "Cookie: session=hunter2", "u"]),
        "curl -H Cookie: *** u"
    );
    assert_eq!(
        cmd(&["curl", "-H", "cookie:session=hunter2", "u"]),
        "curl -H cookie:*** u"
    );
}

#[test]
fn curl_cookies() {
    assert_eq!(
        cmd(&["curl", "-b", "session=hunter2", "u"]),
        "curl -b *** u"
    );
    assert_eq!(
        cmd(&["curl", "--cookie", "session=hunter2", "u"]),
        "curl --cookie *** u"
    );
    // -b of git is a branch.
    assert_eq!(
        cmd(&["git", "checkout", "-b", "topic"]),
        "git checkout -b topic"
    );
}

#[test]
fn git_extra_header() {
    assert_eq!(
        cmd(&[
            "git",
            "-c",
            "http.extraHeader=Authorization: Bearer hunter2",
            "fetch"
        ]),
        "git -c http.extraHeader=Authorization: *** *** fetch"
    );
    assert_eq!(
        cmd(&[
            "git",
            "-c",
            "http.extraHeader=Authorization:Basic aGk=",
            "fetch"
        ]),
        "git -c http.extraHeader=Authorization:*** *** fetch"
    );
    // Not after -c: one setting, hidden whole.
    assert_eq!(
        cmd(&["x", "--header=Authorization: Bearer hunter2"]),
        "x --header=Authorization: ***"
    );
    assert_eq!(
        cmd(&["git", "-c", "http.sslVerify=false", "fetch"]),
        "git -c http.sslVerify=false fetch"
    );
}

#[test]
fn gpg_passphrase() {
    assert_eq!(
        cmd(&["gpg", "--batch", "--passphrase", "hunter2", "-d", "f"]),
        "gpg --batch --passphrase *** -d f"
    );
    assert_eq!(
        cmd(&["gpg", "--passphrase-file", "/p", "--passphrase-fd", "0"]),
        "gpg --passphrase-file /p --passphrase-fd 0"
    );
}

#[test]
fn mount_options() {
    assert_eq!(
        cmd(&[
            "mount",
            "-t",
            "cifs",
            "-o",
            "username=bob,password=hunter2,uid=1000",
            "//s/x",
            "/mnt"
        ]),
        "mount -t cifs -o username=bob,password=***,uid=1000 //s/x /mnt"
    );
    assert_eq!(
        cmd(&["mount", "-o", "rw,noatime", "/dev/x", "/mnt"]),
        "mount -o rw,noatime /dev/x /mnt"
    );
    // Form fields too.
    assert_eq!(
        cmd(&["curl", "-d", "user=bob&token=hunter2", "u"]),
        "curl -d user=bob&token=*** u"
    );
}

#[test]
fn docker_login_password() {
    assert_eq!(
        cmd(&["docker", "login", "-u", "bob", "-p", "hunter2", "reg"]),
        "docker login -u bob -p *** reg"
    );
    assert_eq!(
        cmd(&["helm", "registry", "login", "-p", "hunter2", "reg"]),
        "helm registry login -p *** reg"
    );
    // -p of docker run is a port.
    assert_eq!(
        cmd(&["docker", "run", "-p", "8080:80", "img"]),
        "docker run -p 8080:80 img"
    );
}

#[test]
fn mysql_pwd_assignment() {
    assert_eq!(
        cmd(&["env", "MYSQL_PWD=hunter2", "mysql", "db"]),
        "env MYSQL_PWD=*** mysql db"
    );
    assert_eq!(
        cmd(&["sh", "-c", "MYSQL_PWD=hunter2 mysql db"]),
        "sh -c MYSQL_PWD=*** mysql db"
    );
    // The working directory is no password.
    assert_eq!(
        cmd(&["env", "PWD=/srv", "OLDPWD=/", "x"]),
        "env PWD=/srv OLDPWD=/ x"
    );
}

#[test]
fn pscp_pw() {
    assert_eq!(
        cmd(&["pscp", "-pw", "hunter2", "f", "bob@h:/x"]),
        "pscp -pw *** f bob@h:/x"
    );
    assert_eq!(cmd(&["plink", "-pw", "hunter2", "h"]), "plink -pw *** h");
}

#[test]
fn smbclient_user_percent_password() {
    assert_eq!(
        cmd(&["smbclient", "-U", "bob%hunter2", "//s/x"]),
        "smbclient -U bob%*** //s/x"
    );
    assert_eq!(
        cmd(&["smbclient", "-Ubob%hunter2", "--user=bob%hunter2", "//s/x"]),
        "smbclient -Ubob%*** --user=bob%*** //s/x"
    );
    assert_eq!(
        cmd(&["smbclient", "-U", "bob", "//s/x"]),
        "smbclient -U bob //s/x"
    );
}

#[test]
fn innocent_commands_stay_unchanged() {
    for c in [
        &[
            "curl",
            "-sS",
            "-H",
            "Accept: application/json",
            "https://h/a",
        ][..],
        &[
            "curl",
            "-X",
            "POST",
            "-d",
            r#"{"name":"x","n":2}"#,
            "https://h",
        ],
        &["docker", "run", "--user", "1000:1000", "-p", "80:80", "img"],
        &[
            "git",
            "-c",
            "user.name=Ann",
            "commit",
            "-m",
            "fix auth flow",
        ],
        &["git", "checkout", "-b", "feature/cookie-banner"],
        &["mount", "-o", "ro,uid=1000,gid=1000", "/dev/sdb1", "/mnt"],
        &["gpg", "--verify", "f.sig", "f"],
        &["rsync", "-az", "-e", "ssh -p 2222", "src/", "h:/dst/"],
        &["scp", "-P", "2222", "f", "bob@h:/x"],
        &["kubectl", "get", "pods", "-o", "jsonpath={.items[*].name}"],
        &["ssh", "h", "cd /srv && ./deploy --env=prod,eu"],
        &["tar", "-czf", "b.tgz", "--exclude=node_modules", "."],
        &["env", "PWD=/srv", "PATH=/bin:/usr/bin", "x"],
        &["./job", "--user", "bob", "--pwd", "/tmp"],
        &["echo", "ghp_", "AKIA", "xoxb-1"],
        &["nc", "auth.example.com:443"],
    ] {
        assert_eq!(cmd(c), c.join(" "), "{c:?}");
    }
}
