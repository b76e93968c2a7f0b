//! Starting the command from the guard: clone(CLONE_VM | CLONE_VFORK)
//! and the child's few syscalls before exec, with the signal dispositions
//! and mask rlock had handed back to it.

use std::os::fd::RawFd;

use crate::exit_code;

use super::handle::Launch;
use super::last_errno;

/// Signals the guard ignores for itself; the command gets them back as
/// rlock found them.
pub(super) const IGNORED: [i32; 10] = {
    let f = crate::exec::FORWARDED;
    [
        f[0],
        f[1],
        f[2],
        f[3],
        f[4],
        f[5],
        libc::SIGPIPE,
        libc::SIGTSTP,
        libc::SIGTTIN,
        libc::SIGTTOU,
    ]
};

/// Signal dispositions and mask as rlock had them, to hand on to the
/// command unchanged.
#[derive(Clone, Copy)]
pub(super) struct Inherited {
    pub(super) actions: [libc::sigaction; IGNORED.len() + 1],
    pub(super) mask: libc::sigset_t,
}

pub(super) const CHLD: usize = IGNORED.len();

/// Start the command: a new process group (made the terminal's foreground
/// group if asked), SIGKILLed if the guard dies, with rlock's signal
/// dispositions and mask restored, and rlock's environment plus `env`
/// (NUL-separated `K=V` pairs).
///
/// The child is made with `clone(CLONE_VM | CLONE_VFORK)`, as posix_spawn
/// does: it borrows the guard's memory until it execs, so nothing of the
/// guard's address space is copied (a fork would copy its page tables and
/// leave both processes copy-on-write faults to take). posix_spawn itself
/// cannot set PR_SET_PDEATHSIG, hence this. The child runs on a stack of
/// its own, makes only syscalls and glibc's `execvpe` (written to run after
/// vfork, for posix_spawnp: no malloc, no locks), and the guard installs no
/// signal handler that could run on the child's stack.
pub(super) fn spawn(launch: &Launch, env: &[u8], inh: &Inherited) -> std::io::Result<libc::pid_t> {
    use std::ffi::{CStr, CString};
    use std::os::unix::ffi::OsStrExt;
    let einval = || std::io::Error::from_raw_os_error(libc::ENOEXEC);
    let program = CString::new(launch.program.as_bytes()).map_err(|_| einval())?;
    let mut args = vec![program.clone()];
    for a in launch.args {
        args.push(CString::new(a.as_bytes()).map_err(|_| einval())?);
    }
    let added: Vec<CString> = env
        .split(|&b| b == 0)
        .filter(|p| p.contains(&b'='))
        .map(|p| CString::new(p).map_err(|_| einval()))
        .collect::<std::io::Result<_>>()?;
    let name = |kv: &[u8]| -> Vec<u8> { kv.split(|&b| b == b'=').next().unwrap_or(kv).to_vec() };
    let names: Vec<Vec<u8>> = added.iter().map(|c| name(c.as_bytes())).collect();
    let mut envp: Vec<*const libc::c_char> = Vec::new();
    // rlock's environment as the C library has it, read without std's
    // environment lock (a forking library caller's thread may hold it).
    unsafe extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: environ is a NULL-terminated array of C strings; this
    // process has one thread and nothing changes it meanwhile.
    unsafe {
        let mut p = environ;
        while !p.is_null() && !(*p).is_null() {
            let kv = CStr::from_ptr(*p).to_bytes();
            if !names.iter().any(|n| *n == name(kv)) {
                envp.push(*p);
            }
            p = p.add(1);
        }
    }
    envp.extend(added.iter().map(|c| c.as_ptr()));
    envp.push(std::ptr::null());
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut child = Child {
        program: program.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        // SAFETY: plain syscall.
        guard: unsafe { libc::getpid() },
        tty: launch.tty.filter(|_| launch.foreground).unwrap_or(-1),
        inh: *inh,
        errno: 0,
    };
    // Room for execvpe's path buffer and its argv copy for a script
    // without a #! line; untouched pages cost nothing.
    let mut stack = vec![0u8; 256 * 1024 + 16 * argv.len()];
    // SAFETY: the stack grows down from its 16-aligned end; `child` and
    // everything it points to outlive the clone, which returns only once
    // the child has exec'd or exited (CLONE_VFORK).
    let pid = unsafe {
        let top = stack.as_mut_ptr().add(stack.len()) as usize & !15;
        libc::clone(
            child_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut child as *mut Child).cast(),
        )
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the child is done with our memory (CLONE_VFORK); a volatile
    // read, as the compiler does not know the child wrote it.
    let errno = unsafe { std::ptr::read_volatile(&child.errno) };
    if errno != 0 {
        // SAFETY: reap the child that failed to exec.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        return Err(std::io::Error::from_raw_os_error(errno));
    }
    Ok(pid)
}

/// What the cloned child needs, in the guard's memory.
struct Child {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    guard: libc::pid_t,
    tty: RawFd,
    inh: Inherited,
    /// Set by the child if it fails before or at exec.
    errno: i32,
}

/// The child between clone and exec: syscalls only (see [`spawn`]).
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the guard's `Child`, valid until we exec or exit;
    // only async-signal-safe calls follow.
    unsafe {
        let c = &mut *arg.cast::<Child>();
        let fail = |c: &mut Child| -> ! {
            std::ptr::write_volatile(&mut c.errno, last_errno().max(1));
            libc::_exit(127)
        };
        if libc::setpgid(0, 0) != 0 {
            fail(c);
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            fail(c);
        }
        if libc::getppid() != c.guard {
            libc::_exit(i32::from(exit_code::LOST)); // the guard died already
        }
        if c.tty >= 0 {
            // Still ignoring SIGTTOU (the guard's setting), so a
            // background group may take the terminal.
            libc::tcsetpgrp(c.tty, libc::getpid());
        }
        for (i, &sig) in IGNORED.iter().enumerate() {
            // SIGPIPE as std leaves it for any child: the default. The
            // Rust runtime ignored it in rlock before main ran; a
            // command must not inherit that (`... | head` would spin).
            if sig == libc::SIGPIPE {
                libc::signal(sig, libc::SIG_DFL);
            } else {
                libc::sigaction(sig, &c.inh.actions[i], std::ptr::null_mut());
            }
        }
        libc::sigaction(libc::SIGCHLD, &c.inh.actions[CHLD], std::ptr::null_mut());
        libc::pthread_sigmask(libc::SIG_SETMASK, &c.inh.mask, std::ptr::null_mut());
        libc::execvpe(c.program, c.argv, c.envp);
        fail(c)
    }
}

/// Install `handler` for `sig`, saving the old action in `old`.
///
/// # Safety
/// Plain syscall; `handler` must be SIG_IGN or SIG_DFL.
pub(super) unsafe fn set_action(sig: i32, handler: libc::sighandler_t, old: &mut libc::sigaction) {
    // SAFETY: zeroed sigaction is a valid empty action.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    // SAFETY: as the caller promises.
    unsafe { libc::sigaction(sig, &act, old) };
}
