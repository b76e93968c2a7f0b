# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_rlock_global_optspecs
    string join \n url= cluster sentinel= min-replicas= tls-ca= tls-cert= tls-key= prefix= connect-timeout= history-events= history-retention= q/quiet v/verbose h/help V/version
end

function __fish_rlock_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_rlock_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_rlock_using_subcommand
    set -l cmd (__fish_rlock_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c rlock -n "__fish_rlock_needs_command" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_needs_command" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_needs_command" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_needs_command" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_needs_command" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_needs_command" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_needs_command" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_needs_command" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_needs_command" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_needs_command" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_needs_command" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_needs_command" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_needs_command" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_needs_command" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "acquire" -d 'Take the lock and print its owner token on stdout (and nothing else)'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "exec" -d 'Run a command while holding the lock, and exit with its status'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "rw" -d 'Read-write lock: many readers at once, or one writer'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "release" -d 'Release a lock held by a token; releasing a free lock is harmless'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "renew" -d 'Extend a held lock\'s TTL; fails if the token no longer owns it'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "check" -d 'Exit 0 if a token still holds the lock, 79 if it holds it no more, 77 if another owner holds it: for scripts about to do something irreversible'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "status" -d 'Show who holds a lock, since when, TTL left, fencing counter, waiters'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "history" -d 'Show a lock\'s history: who got it, for how long, how each hold ended'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "break" -d 'End a stuck lock\'s hold(s) by force; the next waiter gets it once they stopped'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "doctor" -d 'Check the Redis deployment for settings that silently break locks'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "list" -d 'List the locks that are held or waited for'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "top" -d 'A live view of the locks in use, most contended first (like top)'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "metrics" -d 'Print Prometheus metrics for the locks in use (text format 0.0.4)'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l ttl -d 'Lease time; the lock frees itself this long after the last renewal' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s w -l wait -l timeout -d 'Wait at most this long for a busy lock (default: forever); a bare number is seconds, as in flock(1) (`-w 0.5`; `0`: do not wait)' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l min-hold -d 'Keep the lock taken until at least this long after the grant, even if released sooner (exec: if the command succeeded); the lease just ends later on the server, nothing stays running' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l priority -d 'Wait-queue priority, an integer from -1000 to 1000 (default 0): waiters with a higher one are served first, equal ones in arrival order. A holder is never pre-empted, and a steady stream of higher priorities keeps a lower one waiting (bound it with -w). With several keys, the same for each. Not with RedLock (several --url: no queue)' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s E -l conflict-exit-code -d 'Exit code when the lock is busy, the wait times out, or a newer --supersede waiter replaced this one' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l limit -d 'Let up to N holders in at once (counting semaphore)' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l keep-while -d 'With --keep: keep the lock while process PID lives instead' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l on-lost -d 'With --keep: what the keeper does to the watched process (and what it started) if the lock is lost [default: term]' -r -f -a "term\t'SIGTERM to every process of the command, SIGKILL after --grace'
kill\t'SIGKILL to every process of the command at once'
ignore\t'Let the command, and what it started, run on; only report the loss'"
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l grace -d 'With --keep and --on-lost term: time the script gets to exit after SIGTERM before SIGKILL (never later than the lease allows) [default: 10s]' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l max-hold -d 'With --keep: keep the lock at most this long; then the script (and what it started) gets SIGTERM, SIGKILL after --grace, and the lock is released' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s n -l no-wait -l nb -l nonblock -d 'Fail at once if the lock is busy (wins over -w, as in flock)'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l supersede -d 'CI "newest wins" queue: while waiting, a newer --supersede waiter of the same lock replaces this one, which then exits with the -E code ("superseded by host H pid P"); joining, this one replaces the older. Holders are never touched. Everybody else waits in the queue as usual. Not with -n or -w 0, nor RedLock (several --url)'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l keep -d 'Leave a keeper process that renews the lock while the calling process (the script) lives and releases it when that exits'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l and -d 'Hold lock KEY too (repeatable): a lock set, taken deadlock-free' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l ttl -d 'Lease time; the lock frees itself this long after the last renewal' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s w -l wait -l timeout -d 'Wait at most this long for a busy lock (default: forever); a bare number is seconds, as in flock(1) (`-w 0.5`; `0`: do not wait)' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l min-hold -d 'Keep the lock taken until at least this long after the grant, even if released sooner (exec: if the command succeeded); the lease just ends later on the server, nothing stays running' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l priority -d 'Wait-queue priority, an integer from -1000 to 1000 (default 0): waiters with a higher one are served first, equal ones in arrival order. A holder is never pre-empted, and a steady stream of higher priorities keeps a lower one waiting (bound it with -w). With several keys, the same for each. Not with RedLock (several --url: no queue)' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s E -l conflict-exit-code -d 'Exit code when the lock is busy, the wait times out, or a newer --supersede waiter replaced this one' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l limit -d 'Let up to N holders in at once (counting semaphore)' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l on-lost -d 'What to do with the command if the lock is lost while it runs' -r -f -a "term\t'SIGTERM to every process of the command, SIGKILL after --grace'
kill\t'SIGKILL to every process of the command at once'
ignore\t'Let the command, and what it started, run on; only report the loss'"
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l grace -d 'Time the command gets to exit after SIGTERM before SIGKILL' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l max-hold -d 'Hold the lock at most this long: then the command (and what it started) gets SIGTERM, SIGKILL after --grace, the lock is released, and rlock exits 124, as timeout(1) does' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s c -l command -d 'Run CMD through `sh -c`, as flock -c does' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l fd -d 'Refused: rlock locks are not file descriptors' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s n -l no-wait -l nb -l nonblock -d 'Fail at once if the lock is busy (wins over -w, as in flock)'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l supersede -d 'CI "newest wins" queue: while waiting, a newer --supersede waiter of the same lock replaces this one, which then exits with the -E code ("superseded by host H pid P"); joining, this one replaces the older. Holders are never touched. Everybody else waits in the queue as usual. Not with -n or -w 0, nor RedLock (several --url)'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l kill-leftovers -d 'When the command exits, end what it left running (SIGTERM, then SIGKILL after --grace) instead of holding the lock until it exits'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s s -l shared -d 'Take a shared (read) lock: `rlock exec -s K` is `rlock rw read K`'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s x -l exclusive -d 'Take an exclusive lock (the default)'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s o -l close -d 'Accepted: rlock never passes a lock descriptor to the command'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s F -l no-fork -d 'Refused: rlock must stay alive to renew the lease'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s u -l unlock -d 'Refused: rlock locks are released with `rlock release`'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand exec" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l and -d 'With a command, hold lock KEY too (repeatable), as exec does' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l ttl -d 'Lease time; the lock frees itself this long after the last renewal' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -s w -l wait -l timeout -d 'Wait at most this long for a busy lock (default: forever); a bare number is seconds, as in flock(1) (`-w 0.5`; `0`: do not wait)' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l min-hold -d 'Keep the lock taken until at least this long after the grant, even if released sooner (exec: if the command succeeded); the lease just ends later on the server, nothing stays running' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l priority -d 'Wait-queue priority, an integer from -1000 to 1000 (default 0): waiters with a higher one are served first, equal ones in arrival order. A holder is never pre-empted, and a steady stream of higher priorities keeps a lower one waiting (bound it with -w). With several keys, the same for each. Not with RedLock (several --url: no queue)' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -s E -l conflict-exit-code -d 'Exit code when the lock is busy, the wait times out, or a newer --supersede waiter replaced this one' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l on-lost -d 'What to do with the command if the lock is lost while it runs' -r -f -a "term\t'SIGTERM to every process of the command, SIGKILL after --grace'
kill\t'SIGKILL to every process of the command at once'
ignore\t'Let the command, and what it started, run on; only report the loss'"
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l grace -d 'Time the command gets to exit after SIGTERM before SIGKILL' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l max-hold -d 'Hold the lock at most this long: then the command (and what it started) gets SIGTERM, SIGKILL after --grace, the lock is released, and rlock exits 124, as timeout(1) does' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand rw" -s n -l no-wait -l nb -l nonblock -d 'Fail at once if the lock is busy (wins over -w, as in flock)'
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l supersede -d 'CI "newest wins" queue: while waiting, a newer --supersede waiter of the same lock replaces this one, which then exits with the -E code ("superseded by host H pid P"); joining, this one replaces the older. Holders are never touched. Everybody else waits in the queue as usual. Not with -n or -w 0, nor RedLock (several --url)'
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l kill-leftovers -d 'When the command exits, end what it left running (SIGTERM, then SIGKILL after --grace) instead of holding the lock until it exits'
complete -c rlock -n "__fish_rlock_using_subcommand rw" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand rw" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand rw" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand rw" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand release" -l token -d 'Owner token printed by `rlock acquire`. Without it: inside `rlock exec` of the lock (at any depth), the token RLOCK_HELD records for it; else $RLOCK_TOKEN' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l min-hold -d 'Keep the lock taken until at least this long after it was granted' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand release" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand release" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand release" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand release" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand release" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand release" -s h -l help -d 'Print help'
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l token -d 'Owner token printed by `rlock acquire`. Without it: inside `rlock exec` of the lock (at any depth), the token RLOCK_HELD records for it; else $RLOCK_TOKEN' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l ttl -d 'New TTL, counted from now' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand renew" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand renew" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand renew" -s h -l help -d 'Print help'
complete -c rlock -n "__fish_rlock_using_subcommand check" -l token -d 'Owner token printed by `rlock acquire`. Without it: inside `rlock exec` of the lock (at any depth), the token RLOCK_HELD records for it; else $RLOCK_TOKEN' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand check" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand check" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand check" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l json -d 'Print JSON on stdout'
complete -c rlock -n "__fish_rlock_using_subcommand check" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand check" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand check" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand check" -s h -l help -d 'Print help'
complete -c rlock -n "__fish_rlock_using_subcommand status" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand status" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand status" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand status" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand status" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand status" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand status" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand status" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand status" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand status" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand status" -l json -d 'Print JSON instead of text'
complete -c rlock -n "__fish_rlock_using_subcommand status" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand status" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand status" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand status" -s h -l help -d 'Print help'
complete -c rlock -n "__fish_rlock_using_subcommand history" -l limit -d 'Show the last N events (1 to 100000; with --all, of all locks)' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l since -d 'Only events of the last D (e.g. 1h, 30m; by this machine\'s clock)' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand history" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand history" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand history" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l all -d 'Every lock\'s events, in time order, each with its lock\'s name'
complete -c rlock -n "__fish_rlock_using_subcommand history" -l follow -d 'Keep printing new events as they happen (until interrupted)'
complete -c rlock -n "__fish_rlock_using_subcommand history" -l json -d 'Print one JSON object per line instead of text'
complete -c rlock -n "__fish_rlock_using_subcommand history" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand history" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand history" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand history" -s h -l help -d 'Print help'
complete -c rlock -n "__fish_rlock_using_subcommand break" -l reason -d 'Why the lock is broken: told to the broken holder, kept in the lock\'s history' -r
complete -c rlock -n "__fish_rlock_using_subcommand break" -l holder -d 'Only this holder: its fence as status shows it, or PID@HOST' -r
complete -c rlock -n "__fish_rlock_using_subcommand break" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand break" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand break" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand break" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand break" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand break" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand break" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand break" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand break" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand break" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand break" -s y -l yes -d 'Do not ask for confirmation (required without a terminal)'
complete -c rlock -n "__fish_rlock_using_subcommand break" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand break" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand break" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand break" -s h -l help -d 'Print help'
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l ttl -d 'The longest TTL (or --min-hold) your locks use: the restart delay and the clock margin are worked out for it' -r
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l role -d 'Check that this Redis user has exactly what ROLE needs, no more and no less (the ACL lines of docs/deployments.md#roles), instead of every permission rlock can use' -r -f -a "job\t''
operator\t''
monitor\t''"
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l json -d 'Print JSON instead of text'
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c rlock -n "__fish_rlock_using_subcommand list" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand list" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand list" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand list" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand list" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand list" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand list" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand list" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand list" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand list" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand list" -l json -d 'Print JSON (one array) instead of text'
complete -c rlock -n "__fish_rlock_using_subcommand list" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand list" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand list" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand list" -s h -l help -d 'Print help'
complete -c rlock -n "__fish_rlock_using_subcommand top" -s d -l delay -d 'Refresh every D (a bare number is seconds; 0.1s to 1h)' -r
complete -c rlock -n "__fish_rlock_using_subcommand top" -l sort -d 'Order of the rows (s in the live view cycles through them)' -r -f -a "contended\t'Most contended first (more waiters, the longer oldest wait, more grants in the last minute, more holders), then by name'
name\t'By name'
held\t'The longest hold first'
wait\t'The longest oldest wait first'"
complete -c rlock -n "__fish_rlock_using_subcommand top" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand top" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand top" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand top" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand top" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand top" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand top" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand top" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand top" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand top" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand top" -l once -d 'Print one plain frame and exit'
complete -c rlock -n "__fish_rlock_using_subcommand top" -l json -d 'With --once: one JSON object per lock, one per line'
complete -c rlock -n "__fish_rlock_using_subcommand top" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand top" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand top" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand top" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l group -d 'Fold the locks this glob matches into one series per family, lock="PATTERN" (repeatable; the first that matches)' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l listen -d 'Serve the metrics over HTTP at ADDR (IP:PORT or HOST:PORT), path /metrics' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l textfile -d 'Write the metrics to PATH atomically (temporary file, then rename)' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l url -d 'Redis URL: redis://[user:pass@]host:port/db, rediss:// (TLS) or unix:///path; several (repeated, or comma-separated) mean RedLock over independent masters' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l sentinel -d 'The URLs are Sentinels; lock on the master they know by this name' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l min-replicas -d 'Confirm each new grant on N replicas (WAIT) or fail and release it' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l tls-ca -d 'CA certificate (PEM) to trust for rediss:// instead of the system\'s' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require one' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l tls-key -d 'Private key (PEM) of the client certificate' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l prefix -d 'Prefix of every Redis key rlock writes' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l connect-timeout -d 'Give up connecting (or waiting for a reply) after this long: exit 69, "Redis at HOST:PORT did not answer within D"' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l history-events -d 'Events each lock\'s history keeps (about; 0: counters only), see `rlock history`' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l history-retention -d 'How long a lock\'s history and counters outlive its last event (1s to 366d)' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l cluster -d 'The URLs are seed nodes of one Redis Cluster (not RedLock masters)'
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -s q -l quiet -d 'Print nothing on stderr but errors'
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -s v -l verbose -d 'Say on stderr what happens (acquired, waiting, released)'
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -s h -l help -d 'Print help'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "acquire" -d 'Take the lock and print its owner token on stdout (and nothing else)'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "exec" -d 'Run a command while holding the lock, and exit with its status'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "rw" -d 'Read-write lock: many readers at once, or one writer'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "release" -d 'Release a lock held by a token; releasing a free lock is harmless'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "renew" -d 'Extend a held lock\'s TTL; fails if the token no longer owns it'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "check" -d 'Exit 0 if a token still holds the lock, 79 if it holds it no more, 77 if another owner holds it: for scripts about to do something irreversible'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "status" -d 'Show who holds a lock, since when, TTL left, fencing counter, waiters'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "history" -d 'Show a lock\'s history: who got it, for how long, how each hold ended'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "break" -d 'End a stuck lock\'s hold(s) by force; the next waiter gets it once they stopped'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "doctor" -d 'Check the Redis deployment for settings that silently break locks'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "list" -d 'List the locks that are held or waited for'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "top" -d 'A live view of the locks in use, most contended first (like top)'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "metrics" -d 'Print Prometheus metrics for the locks in use (text format 0.0.4)'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from acquire exec rw release renew check status history break doctor list top metrics help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
