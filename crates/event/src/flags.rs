//! Symbol tables for flag and enumeration parameters, and errno names.
//!
//! Rendering follows Falco's spelling so that conditions such as
//! `evt.arg.flags contains O_TRUNC` or `evt.arg.request contains PTRACE_ATTACH` work unchanged.
//! Values are the Linux x86-64 ones (`include/uapi/asm-generic/fcntl.h`, `include/uapi/linux/*.h`).
//!
//! Nothing is ever lost: bits no symbol covers are appended as one hexadecimal number
//! (`O_RDONLY|0x40000000`), and an enumeration value without a name is rendered in decimal, so
//! [`parse`] of a [`render`]ed value always gives the value back.

use std::fmt::Write as _;

use crate::table::FlagTable;

type Symbols = &'static [(u64, &'static str)];

/// `open(2)` flag bits other than the access mode, in rendering order. `O_SYNC` and `O_TMPFILE`
/// include `O_DSYNC` and `O_DIRECTORY` (as in the kernel's headers); a composite is named only
/// when all its bits are set.
const OPEN_BITS: Symbols = &[
    (0o100, "O_CREAT"),
    (0o200, "O_EXCL"),
    (0o400, "O_NOCTTY"),
    (0o1000, "O_TRUNC"),
    (0o2000, "O_APPEND"),
    (0o4000, "O_NONBLOCK"),
    (0o10000, "O_DSYNC"),
    (0o20000, "O_ASYNC"),
    (0o40000, "O_DIRECT"),
    (0o100000, "O_LARGEFILE"),
    (0o200000, "O_DIRECTORY"),
    (0o400000, "O_NOFOLLOW"),
    (0o1000000, "O_NOATIME"),
    (0o2000000, "O_CLOEXEC"),
    (0o4010000, "O_SYNC"),
    (0o10000000, "O_PATH"),
    (0o20200000, "O_TMPFILE"),
];
const OPEN_ACCESS: Symbols = &[(0, "O_RDONLY"), (1, "O_WRONLY"), (2, "O_RDWR")];
const OPEN_ALIASES: Symbols = &[
    (0o4000, "O_NDELAY"),
    (0o20000, "FASYNC"),
    (0o4010000, "O_RSYNC"),
];

const MODE: Symbols = &[
    (0o400, "S_IRUSR"),
    (0o200, "S_IWUSR"),
    (0o100, "S_IXUSR"),
    (0o40, "S_IRGRP"),
    (0o20, "S_IWGRP"),
    (0o10, "S_IXGRP"),
    (0o4, "S_IROTH"),
    (0o2, "S_IWOTH"),
    (0o1, "S_IXOTH"),
    (0o4000, "S_ISUID"),
    (0o2000, "S_ISGID"),
    (0o1000, "S_ISVTX"),
];
const MODE_ALIASES: Symbols = &[(0o700, "S_IRWXU"), (0o70, "S_IRWXG"), (0o7, "S_IRWXO")];

/// `clone(2)` flags (`include/uapi/linux/sched.h`). For `clone(2)` the low byte is the exit
/// signal, which is rendered as leftover bits; `CLONE_NEWTIME` (0x80) is only valid for `clone3`
/// and `unshare`, where that byte holds no signal.
const CLONE: Symbols = &[
    (0x80, "CLONE_NEWTIME"),
    (0x100, "CLONE_VM"),
    (0x200, "CLONE_FS"),
    (0x400, "CLONE_FILES"),
    (0x800, "CLONE_SIGHAND"),
    (0x1000, "CLONE_PIDFD"),
    (0x2000, "CLONE_PTRACE"),
    (0x4000, "CLONE_VFORK"),
    (0x8000, "CLONE_PARENT"),
    (0x10000, "CLONE_THREAD"),
    (0x20000, "CLONE_NEWNS"),
    (0x40000, "CLONE_SYSVSEM"),
    (0x80000, "CLONE_SETTLS"),
    (0x100000, "CLONE_PARENT_SETTID"),
    (0x200000, "CLONE_CHILD_CLEARTID"),
    (0x400000, "CLONE_DETACHED"),
    (0x800000, "CLONE_UNTRACED"),
    (0x1000000, "CLONE_CHILD_SETTID"),
    (0x2000000, "CLONE_NEWCGROUP"),
    (0x4000000, "CLONE_NEWUTS"),
    (0x8000000, "CLONE_NEWIPC"),
    (0x10000000, "CLONE_NEWUSER"),
    (0x20000000, "CLONE_NEWPID"),
    (0x40000000, "CLONE_NEWNET"),
    (0x80000000, "CLONE_IO"),
    (0x100000000, "CLONE_CLEAR_SIGHAND"),
    (0x200000000, "CLONE_INTO_CGROUP"),
];

const PTRACE: Symbols = &[
    (0, "PTRACE_TRACEME"),
    (1, "PTRACE_PEEKTEXT"),
    (2, "PTRACE_PEEKDATA"),
    (3, "PTRACE_PEEKUSR"),
    (4, "PTRACE_POKETEXT"),
    (5, "PTRACE_POKEDATA"),
    (6, "PTRACE_POKEUSR"),
    (7, "PTRACE_CONT"),
    (8, "PTRACE_KILL"),
    (9, "PTRACE_SINGLESTEP"),
    (12, "PTRACE_GETREGS"),
    (13, "PTRACE_SETREGS"),
    (14, "PTRACE_GETFPREGS"),
    (15, "PTRACE_SETFPREGS"),
    (16, "PTRACE_ATTACH"),
    (17, "PTRACE_DETACH"),
    (18, "PTRACE_GETFPXREGS"),
    (19, "PTRACE_SETFPXREGS"),
    (21, "PTRACE_OLDSETOPTIONS"),
    (24, "PTRACE_SYSCALL"),
    (25, "PTRACE_GET_THREAD_AREA"),
    (26, "PTRACE_SET_THREAD_AREA"),
    (30, "PTRACE_ARCH_PRCTL"),
    (31, "PTRACE_SYSEMU"),
    (32, "PTRACE_SYSEMU_SINGLESTEP"),
    (33, "PTRACE_SINGLEBLOCK"),
    (0x4200, "PTRACE_SETOPTIONS"),
    (0x4201, "PTRACE_GETEVENTMSG"),
    (0x4202, "PTRACE_GETSIGINFO"),
    (0x4203, "PTRACE_SETSIGINFO"),
    (0x4204, "PTRACE_GETREGSET"),
    (0x4205, "PTRACE_SETREGSET"),
    (0x4206, "PTRACE_SEIZE"),
    (0x4207, "PTRACE_INTERRUPT"),
    (0x4208, "PTRACE_LISTEN"),
    (0x4209, "PTRACE_PEEKSIGINFO"),
    (0x420a, "PTRACE_GETSIGMASK"),
    (0x420b, "PTRACE_SETSIGMASK"),
    (0x420c, "PTRACE_SECCOMP_GET_FILTER"),
    (0x420d, "PTRACE_SECCOMP_GET_METADATA"),
    (0x420e, "PTRACE_GET_SYSCALL_INFO"),
    (0x420f, "PTRACE_GET_RSEQ_CONFIGURATION"),
    (0x4210, "PTRACE_SET_SYSCALL_USER_DISPATCH_CONFIG"),
    (0x4211, "PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG"),
];
const PTRACE_ALIASES: Symbols = &[(3, "PTRACE_PEEKUSER"), (6, "PTRACE_POKEUSER")];

/// `enum bpf_cmd` (`include/uapi/linux/bpf.h`).
const BPF_CMD: Symbols = &[
    (0, "BPF_MAP_CREATE"),
    (1, "BPF_MAP_LOOKUP_ELEM"),
    (2, "BPF_MAP_UPDATE_ELEM"),
    (3, "BPF_MAP_DELETE_ELEM"),
    (4, "BPF_MAP_GET_NEXT_KEY"),
    (5, "BPF_PROG_LOAD"),
    (6, "BPF_OBJ_PIN"),
    (7, "BPF_OBJ_GET"),
    (8, "BPF_PROG_ATTACH"),
    (9, "BPF_PROG_DETACH"),
    (10, "BPF_PROG_TEST_RUN"),
    (11, "BPF_PROG_GET_NEXT_ID"),
    (12, "BPF_MAP_GET_NEXT_ID"),
    (13, "BPF_PROG_GET_FD_BY_ID"),
    (14, "BPF_MAP_GET_FD_BY_ID"),
    (15, "BPF_OBJ_GET_INFO_BY_FD"),
    (16, "BPF_PROG_QUERY"),
    (17, "BPF_RAW_TRACEPOINT_OPEN"),
    (18, "BPF_BTF_LOAD"),
    (19, "BPF_BTF_GET_FD_BY_ID"),
    (20, "BPF_TASK_FD_QUERY"),
    (21, "BPF_MAP_LOOKUP_AND_DELETE_ELEM"),
    (22, "BPF_MAP_FREEZE"),
    (23, "BPF_BTF_GET_NEXT_ID"),
    (24, "BPF_MAP_LOOKUP_BATCH"),
    (25, "BPF_MAP_LOOKUP_AND_DELETE_BATCH"),
    (26, "BPF_MAP_UPDATE_BATCH"),
    (27, "BPF_MAP_DELETE_BATCH"),
    (28, "BPF_LINK_CREATE"),
    (29, "BPF_LINK_UPDATE"),
    (30, "BPF_LINK_GET_FD_BY_ID"),
    (31, "BPF_LINK_GET_NEXT_ID"),
    (32, "BPF_ENABLE_STATS"),
    (33, "BPF_ITER_CREATE"),
    (34, "BPF_LINK_DETACH"),
    (35, "BPF_PROG_BIND_MAP"),
    (36, "BPF_TOKEN_CREATE"),
];
const BPF_CMD_ALIASES: Symbols = &[(10, "BPF_PROG_RUN")];

/// Address families (`include/linux/socket.h`).
const SOCKET_FAMILY: Symbols = &[
    (0, "AF_UNSPEC"),
    (1, "AF_UNIX"),
    (2, "AF_INET"),
    (3, "AF_AX25"),
    (4, "AF_IPX"),
    (5, "AF_APPLETALK"),
    (6, "AF_NETROM"),
    (7, "AF_BRIDGE"),
    (8, "AF_ATMPVC"),
    (9, "AF_X25"),
    (10, "AF_INET6"),
    (11, "AF_ROSE"),
    (12, "AF_DECnet"),
    (13, "AF_NETBEUI"),
    (14, "AF_SECURITY"),
    (15, "AF_KEY"),
    (16, "AF_NETLINK"),
    (17, "AF_PACKET"),
    (18, "AF_ASH"),
    (19, "AF_ECONET"),
    (20, "AF_ATMSVC"),
    (21, "AF_RDS"),
    (22, "AF_SNA"),
    (23, "AF_IRDA"),
    (24, "AF_PPPOX"),
    (25, "AF_WANPIPE"),
    (26, "AF_LLC"),
    (27, "AF_IB"),
    (28, "AF_MPLS"),
    (29, "AF_CAN"),
    (30, "AF_TIPC"),
    (31, "AF_BLUETOOTH"),
    (32, "AF_IUCV"),
    (33, "AF_RXRPC"),
    (34, "AF_ISDN"),
    (35, "AF_PHONET"),
    (36, "AF_IEEE802154"),
    (37, "AF_CAIF"),
    (38, "AF_ALG"),
    (39, "AF_NFC"),
    (40, "AF_VSOCK"),
    (41, "AF_KCM"),
    (42, "AF_QIPCRTR"),
    (43, "AF_SMC"),
    (44, "AF_XDP"),
    (45, "AF_MCTP"),
];
const SOCKET_FAMILY_ALIASES: Symbols = &[(1, "AF_LOCAL"), (16, "AF_ROUTE")];

/// The socket type lives in the low four bits (`SOCK_TYPE_MASK`); the rest are flags.
const SOCK_TYPE_MASK: u64 = 0xf;
const SOCKET_TYPE: Symbols = &[
    (1, "SOCK_STREAM"),
    (2, "SOCK_DGRAM"),
    (3, "SOCK_RAW"),
    (4, "SOCK_RDM"),
    (5, "SOCK_SEQPACKET"),
    (6, "SOCK_DCCP"),
    (10, "SOCK_PACKET"),
];
const SOCKET_TYPE_BITS: Symbols = &[(0o4000, "SOCK_NONBLOCK"), (0o2000000, "SOCK_CLOEXEC")];

const FCNTL_CMD: Symbols = &[
    (0, "F_DUPFD"),
    (1, "F_GETFD"),
    (2, "F_SETFD"),
    (3, "F_GETFL"),
    (4, "F_SETFL"),
    (5, "F_GETLK"),
    (6, "F_SETLK"),
    (7, "F_SETLKW"),
    (8, "F_SETOWN"),
    (9, "F_GETOWN"),
    (10, "F_SETSIG"),
    (11, "F_GETSIG"),
    (15, "F_SETOWN_EX"),
    (16, "F_GETOWN_EX"),
    (17, "F_GETOWNER_UIDS"),
    (36, "F_OFD_GETLK"),
    (37, "F_OFD_SETLK"),
    (38, "F_OFD_SETLKW"),
    (1024, "F_SETLEASE"),
    (1025, "F_GETLEASE"),
    (1026, "F_NOTIFY"),
    (1027, "F_DUPFD_QUERY"),
    (1028, "F_CREATED_QUERY"),
    (1029, "F_CANCELLK"),
    (1030, "F_DUPFD_CLOEXEC"),
    (1031, "F_SETPIPE_SZ"),
    (1032, "F_GETPIPE_SZ"),
    (1033, "F_ADD_SEALS"),
    (1034, "F_GET_SEALS"),
    (1035, "F_GET_RW_HINT"),
    (1036, "F_SET_RW_HINT"),
    (1037, "F_GET_FILE_RW_HINT"),
    (1038, "F_SET_FILE_RW_HINT"),
];

const AT: Symbols = &[
    (0x100, "AT_SYMLINK_NOFOLLOW"),
    (0x200, "AT_REMOVEDIR"),
    (0x400, "AT_SYMLINK_FOLLOW"),
    (0x800, "AT_NO_AUTOMOUNT"),
    (0x1000, "AT_EMPTY_PATH"),
    (0x2000, "AT_STATX_FORCE_SYNC"),
    (0x4000, "AT_STATX_DONT_SYNC"),
    (0x8000, "AT_RECURSIVE"),
];
const AT_ALIASES: Symbols = &[(0x200, "AT_EACCESS")];

/// Namespace types first; `unshare(2)` also takes a few non-namespace `CLONE_*` bits.
const NAMESPACE: Symbols = &[
    (0x20000, "CLONE_NEWNS"),
    (0x2000000, "CLONE_NEWCGROUP"),
    (0x4000000, "CLONE_NEWUTS"),
    (0x8000000, "CLONE_NEWIPC"),
    (0x10000000, "CLONE_NEWUSER"),
    (0x20000000, "CLONE_NEWPID"),
    (0x40000000, "CLONE_NEWNET"),
    (0x80, "CLONE_NEWTIME"),
    (0x200, "CLONE_FS"),
    (0x400, "CLONE_FILES"),
    (0x40000, "CLONE_SYSVSEM"),
];

/// `mount(2)` flags (`include/uapi/linux/mount.h`). `MS_MGC_VAL` is the legacy magic in the top
/// 16 bits; it is listed first so that it is recognised before the single bits it overlaps.
const MOUNT: Symbols = &[
    (0xC0ED_0000, "MS_MGC_VAL"),
    (1, "MS_RDONLY"),
    (2, "MS_NOSUID"),
    (4, "MS_NODEV"),
    (8, "MS_NOEXEC"),
    (16, "MS_SYNCHRONOUS"),
    (32, "MS_REMOUNT"),
    (64, "MS_MANDLOCK"),
    (128, "MS_DIRSYNC"),
    (256, "MS_NOSYMFOLLOW"),
    (1024, "MS_NOATIME"),
    (2048, "MS_NODIRATIME"),
    (4096, "MS_BIND"),
    (8192, "MS_MOVE"),
    (16384, "MS_REC"),
    (32768, "MS_SILENT"),
    (1 << 16, "MS_POSIXACL"),
    (1 << 17, "MS_UNBINDABLE"),
    (1 << 18, "MS_PRIVATE"),
    (1 << 19, "MS_SLAVE"),
    (1 << 20, "MS_SHARED"),
    (1 << 21, "MS_RELATIME"),
    (1 << 22, "MS_KERNMOUNT"),
    (1 << 23, "MS_I_VERSION"),
    (1 << 24, "MS_STRICTATIME"),
    (1 << 25, "MS_LAZYTIME"),
    (1 << 30, "MS_ACTIVE"),
    (1 << 31, "MS_NOUSER"),
];
const MOUNT_ALIASES: Symbols = &[(32768, "MS_VERBOSE")];

const MEMFD: Symbols = &[
    (1, "MFD_CLOEXEC"),
    (2, "MFD_ALLOW_SEALING"),
    (4, "MFD_HUGETLB"),
    (8, "MFD_NOEXEC_SEAL"),
    (0x10, "MFD_EXEC"),
];

const SIGNAL: Symbols = &[
    (1, "SIGHUP"),
    (2, "SIGINT"),
    (3, "SIGQUIT"),
    (4, "SIGILL"),
    (5, "SIGTRAP"),
    (6, "SIGABRT"),
    (7, "SIGBUS"),
    (8, "SIGFPE"),
    (9, "SIGKILL"),
    (10, "SIGUSR1"),
    (11, "SIGSEGV"),
    (12, "SIGUSR2"),
    (13, "SIGPIPE"),
    (14, "SIGALRM"),
    (15, "SIGTERM"),
    (16, "SIGSTKFLT"),
    (17, "SIGCHLD"),
    (18, "SIGCONT"),
    (19, "SIGSTOP"),
    (20, "SIGTSTP"),
    (21, "SIGTTIN"),
    (22, "SIGTTOU"),
    (23, "SIGURG"),
    (24, "SIGXCPU"),
    (25, "SIGXFSZ"),
    (26, "SIGVTALRM"),
    (27, "SIGPROF"),
    (28, "SIGWINCH"),
    (29, "SIGIO"),
    (30, "SIGPWR"),
    (31, "SIGSYS"),
];
const SIGNAL_ALIASES: Symbols = &[(6, "SIGIOT"), (29, "SIGPOLL"), (17, "SIGCLD")];

/// How a table's values are composed.
#[derive(Clone, Copy)]
enum Shape {
    /// A plain number.
    Number,
    /// One name per value.
    Enum(Symbols),
    /// Independent bits (a symbol may span several bits).
    Bits(Symbols),
    /// An enumeration in the bits of `mask`, flag bits in the rest.
    EnumAndBits {
        mask: u64,
        names: Symbols,
        bits: Symbols,
    },
}

fn shape(table: FlagTable) -> Shape {
    match table {
        FlagTable::Open => Shape::EnumAndBits {
            mask: 0o3,
            names: OPEN_ACCESS,
            bits: OPEN_BITS,
        },
        FlagTable::Mode => Shape::Bits(MODE),
        FlagTable::Clone => Shape::Bits(CLONE),
        FlagTable::PtraceRequest => Shape::Enum(PTRACE),
        FlagTable::BpfCmd => Shape::Enum(BPF_CMD),
        FlagTable::SocketFamily => Shape::Enum(SOCKET_FAMILY),
        FlagTable::SocketType => Shape::EnumAndBits {
            mask: SOCK_TYPE_MASK,
            names: SOCKET_TYPE,
            bits: SOCKET_TYPE_BITS,
        },
        FlagTable::FcntlCmd => Shape::Enum(FCNTL_CMD),
        FlagTable::At => Shape::Bits(AT),
        FlagTable::Namespace => Shape::Bits(NAMESPACE),
        FlagTable::Mount => Shape::Bits(MOUNT),
        FlagTable::Memfd => Shape::Bits(MEMFD),
        FlagTable::None => Shape::Number,
        FlagTable::Signal => Shape::Enum(SIGNAL),
    }
}

/// Parse-only spellings (`O_NDELAY`, `AF_LOCAL`, `SIGIOT` …).
fn aliases(table: FlagTable) -> Symbols {
    match table {
        FlagTable::Open => OPEN_ALIASES,
        FlagTable::Mode => MODE_ALIASES,
        FlagTable::PtraceRequest => PTRACE_ALIASES,
        FlagTable::BpfCmd => BPF_CMD_ALIASES,
        FlagTable::SocketFamily => SOCKET_FAMILY_ALIASES,
        FlagTable::At => AT_ALIASES,
        FlagTable::Mount => MOUNT_ALIASES,
        FlagTable::Signal => SIGNAL_ALIASES,
        FlagTable::Clone
        | FlagTable::SocketType
        | FlagTable::FcntlCmd
        | FlagTable::Namespace
        | FlagTable::Memfd
        | FlagTable::None => &[],
    }
}

/// Every table, for exhaustive tests and tools.
pub const ALL_TABLES: [FlagTable; 14] = [
    FlagTable::Open,
    FlagTable::Mode,
    FlagTable::Clone,
    FlagTable::PtraceRequest,
    FlagTable::BpfCmd,
    FlagTable::SocketFamily,
    FlagTable::SocketType,
    FlagTable::FcntlCmd,
    FlagTable::At,
    FlagTable::Namespace,
    FlagTable::Mount,
    FlagTable::Memfd,
    FlagTable::None,
    FlagTable::Signal,
];

/// The canonical `(value, name)` symbols of `table`, in rendering order (the access modes first
/// for [`FlagTable::Open`], the types first for [`FlagTable::SocketType`]). Empty for
/// [`FlagTable::None`]. Parse-only aliases are not included.
pub fn symbols(table: FlagTable) -> impl Iterator<Item = (u64, &'static str)> {
    let (first, second): (Symbols, Symbols) = match shape(table) {
        Shape::Number => (&[], &[]),
        Shape::Enum(names) | Shape::Bits(names) => (names, &[]),
        Shape::EnumAndBits { names, bits, .. } => (names, bits),
    };
    first.iter().chain(second).copied()
}

fn push_symbol(out: &mut String, first: &mut bool, name: &str) {
    if !*first {
        out.push('|');
    }
    *first = false;
    out.push_str(name);
}

fn push_hex(out: &mut String, first: &mut bool, value: u64) {
    if !*first {
        out.push('|');
    }
    *first = false;
    // Writing to a String cannot fail.
    let _ = write!(out, "{value:#x}");
}

fn lookup(names: Symbols, value: u64) -> Option<&'static str> {
    names.iter().find(|(v, _)| *v == value).map(|(_, n)| *n)
}

/// Renders the bits of `value` with `bits`, then whatever no symbol covered, in hexadecimal.
fn render_bits(bits: Symbols, value: u64, out: &mut String, first: &mut bool) {
    let mut remaining = value;
    for &(mask, name) in bits {
        if mask != 0 && value & mask == mask && remaining & mask != 0 {
            push_symbol(out, first, name);
            remaining &= !mask;
        }
    }
    if remaining != 0 {
        push_hex(out, first, remaining);
    }
}

/// Appends the symbolic form of `value` for `table` to `out`: flag sets as `A|B|C`, enumerations
/// as their name; unknown bits or values are rendered numerically.
pub fn render(table: FlagTable, value: u64, out: &mut String) {
    match shape(table) {
        Shape::Number => {
            let _ = write!(out, "{value}");
        }
        Shape::Enum(names) => match lookup(names, value) {
            Some(name) => out.push_str(name),
            None => {
                let _ = write!(out, "{value}");
            }
        },
        Shape::Bits(bits) => {
            if value == 0 {
                out.push('0');
            } else {
                render_bits(bits, value, out, &mut true);
            }
        }
        Shape::EnumAndBits { mask, names, bits } => {
            let mut first = true;
            let kind = value & mask;
            match lookup(names, kind) {
                Some(name) => push_symbol(out, &mut first, name),
                None if kind == 0 => {}
                None => push_hex(out, &mut first, kind),
            }
            render_bits(bits, value & !mask, out, &mut first);
            if first {
                out.push('0');
            }
        }
    }
}

/// The value of one number (`17`, `0x11`, `0o21`).
fn parse_number(text: &str) -> Option<u64> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else if let Some(octal) = text.strip_prefix("0o") {
        u64::from_str_radix(octal, 8).ok()
    } else if text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse().ok()
    } else {
        None
    }
}

/// Parses a symbolic (`O_WRONLY|O_CREAT`) or numeric form back to a value.
///
/// Numbers are decimal, `0x` hexadecimal or `0o` octal, and may be mixed with symbols in flag
/// sets. An enumeration takes exactly one name or number. `None` for an empty text, an unknown
/// symbol, or a malformed number.
pub fn parse(table: FlagTable, text: &str) -> Option<u64> {
    let text = text.trim();
    let symbol = |token: &str| -> Option<u64> {
        symbols(table)
            .chain(aliases(table).iter().copied())
            .find(|(_, name)| *name == token)
            .map(|(value, _)| value)
    };
    match shape(table) {
        Shape::Number => parse_number(text),
        Shape::Enum(_) => parse_number(text).or_else(|| symbol(text)),
        Shape::Bits(_) | Shape::EnumAndBits { .. } => {
            let mut value = 0u64;
            for token in text.split('|') {
                let token = token.trim();
                value |= parse_number(token).or_else(|| symbol(token))?;
            }
            Some(value)
        }
    }
}

/// Linux errno names by number (`include/uapi/asm-generic/errno-base.h`, `errno.h`), then the
/// kernel-internal restart codes a tracer can observe at syscall exit (`include/linux/errno.h`).
const ERRNO: &[(i64, &str)] = &[
    (1, "EPERM"),
    (2, "ENOENT"),
    (3, "ESRCH"),
    (4, "EINTR"),
    (5, "EIO"),
    (6, "ENXIO"),
    (7, "E2BIG"),
    (8, "ENOEXEC"),
    (9, "EBADF"),
    (10, "ECHILD"),
    (11, "EAGAIN"),
    (12, "ENOMEM"),
    (13, "EACCES"),
    (14, "EFAULT"),
    (15, "ENOTBLK"),
    (16, "EBUSY"),
    (17, "EEXIST"),
    (18, "EXDEV"),
    (19, "ENODEV"),
    (20, "ENOTDIR"),
    (21, "EISDIR"),
    (22, "EINVAL"),
    (23, "ENFILE"),
    (24, "EMFILE"),
    (25, "ENOTTY"),
    (26, "ETXTBSY"),
    (27, "EFBIG"),
    (28, "ENOSPC"),
    (29, "ESPIPE"),
    (30, "EROFS"),
    (31, "EMLINK"),
    (32, "EPIPE"),
    (33, "EDOM"),
    (34, "ERANGE"),
    (35, "EDEADLK"),
    (36, "ENAMETOOLONG"),
    (37, "ENOLCK"),
    (38, "ENOSYS"),
    (39, "ENOTEMPTY"),
    (40, "ELOOP"),
    (42, "ENOMSG"),
    (43, "EIDRM"),
    (44, "ECHRNG"),
    (45, "EL2NSYNC"),
    (46, "EL3HLT"),
    (47, "EL3RST"),
    (48, "ELNRNG"),
    (49, "EUNATCH"),
    (50, "ENOCSI"),
    (51, "EL2HLT"),
    (52, "EBADE"),
    (53, "EBADR"),
    (54, "EXFULL"),
    (55, "ENOANO"),
    (56, "EBADRQC"),
    (57, "EBADSLT"),
    (59, "EBFONT"),
    (60, "ENOSTR"),
    (61, "ENODATA"),
    (62, "ETIME"),
    (63, "ENOSR"),
    (64, "ENONET"),
    (65, "ENOPKG"),
    (66, "EREMOTE"),
    (67, "ENOLINK"),
    (68, "EADV"),
    (69, "ESRMNT"),
    (70, "ECOMM"),
    (71, "EPROTO"),
    (72, "EMULTIHOP"),
    (73, "EDOTDOT"),
    (74, "EBADMSG"),
    (75, "EOVERFLOW"),
    (76, "ENOTUNIQ"),
    (77, "EBADFD"),
    (78, "EREMCHG"),
    (79, "ELIBACC"),
    (80, "ELIBBAD"),
    (81, "ELIBSCN"),
    (82, "ELIBMAX"),
    (83, "ELIBEXEC"),
    (84, "EILSEQ"),
    (85, "ERESTART"),
    (86, "ESTRPIPE"),
    (87, "EUSERS"),
    (88, "ENOTSOCK"),
    (89, "EDESTADDRREQ"),
    (90, "EMSGSIZE"),
    (91, "EPROTOTYPE"),
    (92, "ENOPROTOOPT"),
    (93, "EPROTONOSUPPORT"),
    (94, "ESOCKTNOSUPPORT"),
    (95, "EOPNOTSUPP"),
    (96, "EPFNOSUPPORT"),
    (97, "EAFNOSUPPORT"),
    (98, "EADDRINUSE"),
    (99, "EADDRNOTAVAIL"),
    (100, "ENETDOWN"),
    (101, "ENETUNREACH"),
    (102, "ENETRESET"),
    (103, "ECONNABORTED"),
    (104, "ECONNRESET"),
    (105, "ENOBUFS"),
    (106, "EISCONN"),
    (107, "ENOTCONN"),
    (108, "ESHUTDOWN"),
    (109, "ETOOMANYREFS"),
    (110, "ETIMEDOUT"),
    (111, "ECONNREFUSED"),
    (112, "EHOSTDOWN"),
    (113, "EHOSTUNREACH"),
    (114, "EALREADY"),
    (115, "EINPROGRESS"),
    (116, "ESTALE"),
    (117, "EUCLEAN"),
    (118, "ENOTNAM"),
    (119, "ENAVAIL"),
    (120, "EISNAM"),
    (121, "EREMOTEIO"),
    (122, "EDQUOT"),
    (123, "ENOMEDIUM"),
    (124, "EMEDIUMTYPE"),
    (125, "ECANCELED"),
    (126, "ENOKEY"),
    (127, "EKEYEXPIRED"),
    (128, "EKEYREVOKED"),
    (129, "EKEYREJECTED"),
    (130, "EOWNERDEAD"),
    (131, "ENOTRECOVERABLE"),
    (132, "ERFKILL"),
    (133, "EHWPOISON"),
    (512, "ERESTARTSYS"),
    (513, "ERESTARTNOINTR"),
    (514, "ERESTARTNOHAND"),
    (515, "ENOIOCTLCMD"),
    (516, "ERESTART_RESTARTBLOCK"),
];
const ERRNO_ALIASES: &[(i64, &str)] = &[(11, "EWOULDBLOCK"), (35, "EDEADLOCK"), (95, "ENOTSUP")];

/// The errno name for a positive errno number (`2` → `ENOENT`).
pub fn errno_name(errno: i64) -> Option<&'static str> {
    ERRNO
        .iter()
        .find(|(n, _)| *n == errno)
        .map(|(_, name)| *name)
}

/// The errno number for a name (`ENOENT` → `2`). Accepts the aliases `EWOULDBLOCK`,
/// `EDEADLOCK` and `ENOTSUP`.
pub fn errno_from_name(name: &str) -> Option<i64> {
    ERRNO
        .iter()
        .chain(ERRNO_ALIASES)
        .find(|(_, n)| *n == name)
        .map(|(number, _)| *number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(table: FlagTable, value: u64) -> String {
        let mut out = String::new();
        render(table, value, &mut out);
        out
    }

    #[test]
    fn open_flags_render_access_mode_first() {
        assert_eq!(
            rendered(FlagTable::Open, 0o1101),
            "O_WRONLY|O_CREAT|O_TRUNC"
        );
        assert_eq!(rendered(FlagTable::Open, 0), "O_RDONLY");
        assert_eq!(rendered(FlagTable::Open, 0o2000000), "O_RDONLY|O_CLOEXEC");
        assert_eq!(
            rendered(FlagTable::Open, 2 | 0o100 | 0o200),
            "O_RDWR|O_CREAT|O_EXCL"
        );
        assert_eq!(
            rendered(FlagTable::Open, 0o4010000),
            "O_RDONLY|O_DSYNC|O_SYNC"
        );
        assert_eq!(rendered(FlagTable::Open, 0o10000), "O_RDONLY|O_DSYNC");
        assert_eq!(
            rendered(FlagTable::Open, 0o20200002),
            "O_RDWR|O_DIRECTORY|O_TMPFILE"
        );
        assert_eq!(rendered(FlagTable::Open, 3), "0x3");
        assert_eq!(
            rendered(FlagTable::Open, 0x4000_0000),
            "O_RDONLY|0x40000000"
        );
    }

    #[test]
    fn bit_sets_render_in_table_order_with_leftovers() {
        assert_eq!(
            rendered(FlagTable::Mode, 0o4755),
            "S_IRUSR|S_IWUSR|S_IXUSR|S_IRGRP|S_IXGRP|S_IROTH|S_IXOTH|S_ISUID"
        );
        assert_eq!(rendered(FlagTable::Mode, 0), "0");
        assert_eq!(
            rendered(FlagTable::Mode, 0o100644),
            "S_IRUSR|S_IWUSR|S_IRGRP|S_IROTH|0x8000"
        );
        assert_eq!(
            rendered(FlagTable::Clone, 0x0120_0011),
            "CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|0x11"
        );
        assert_eq!(
            rendered(FlagTable::At, 0x1100),
            "AT_SYMLINK_NOFOLLOW|AT_EMPTY_PATH"
        );
        assert_eq!(
            rendered(FlagTable::Namespace, 0x4002_0080),
            "CLONE_NEWNS|CLONE_NEWNET|CLONE_NEWTIME"
        );
        assert_eq!(rendered(FlagTable::Mount, 0x5000), "MS_BIND|MS_REC");
        assert_eq!(
            rendered(FlagTable::Mount, 0xC0ED_0001),
            "MS_MGC_VAL|MS_RDONLY"
        );
        assert_eq!(
            rendered(FlagTable::Memfd, 3),
            "MFD_CLOEXEC|MFD_ALLOW_SEALING"
        );
        assert_eq!(rendered(FlagTable::Memfd, 0x100), "0x100");
    }

    #[test]
    fn enumerations_render_names_or_decimal() {
        assert_eq!(rendered(FlagTable::PtraceRequest, 16), "PTRACE_ATTACH");
        assert_eq!(rendered(FlagTable::PtraceRequest, 0), "PTRACE_TRACEME");
        assert_eq!(rendered(FlagTable::PtraceRequest, 0x4206), "PTRACE_SEIZE");
        assert_eq!(
            rendered(FlagTable::PtraceRequest, 0x420e),
            "PTRACE_GET_SYSCALL_INFO"
        );
        assert_eq!(rendered(FlagTable::PtraceRequest, 999), "999");
        assert_eq!(rendered(FlagTable::BpfCmd, 5), "BPF_PROG_LOAD");
        assert_eq!(rendered(FlagTable::SocketFamily, 10), "AF_INET6");
        assert_eq!(rendered(FlagTable::SocketFamily, 17), "AF_PACKET");
        assert_eq!(rendered(FlagTable::FcntlCmd, 1030), "F_DUPFD_CLOEXEC");
        assert_eq!(rendered(FlagTable::Signal, 9), "SIGKILL");
        assert_eq!(rendered(FlagTable::Signal, 0), "0");
        assert_eq!(rendered(FlagTable::Signal, 34), "34");
        assert_eq!(rendered(FlagTable::None, 12345), "12345");
    }

    #[test]
    fn socket_types_combine_type_and_flags() {
        assert_eq!(rendered(FlagTable::SocketType, 1), "SOCK_STREAM");
        assert_eq!(
            rendered(FlagTable::SocketType, 2 | 0o2004000),
            "SOCK_DGRAM|SOCK_NONBLOCK|SOCK_CLOEXEC"
        );
        assert_eq!(rendered(FlagTable::SocketType, 0o2000000), "SOCK_CLOEXEC");
        assert_eq!(rendered(FlagTable::SocketType, 0), "0");
        assert_eq!(
            rendered(FlagTable::SocketType, 7 | 0o4000),
            "0x7|SOCK_NONBLOCK"
        );
    }

    #[test]
    fn parse_accepts_symbols_numbers_and_aliases() {
        assert_eq!(
            parse(FlagTable::Open, "O_WRONLY|O_CREAT|O_TRUNC"),
            Some(0o1101)
        );
        assert_eq!(
            parse(FlagTable::Open, " O_RDONLY | O_CLOEXEC "),
            Some(0o2000000)
        );
        assert_eq!(parse(FlagTable::Open, "O_RDONLY"), Some(0));
        assert_eq!(parse(FlagTable::Open, "O_NDELAY"), Some(0o4000));
        assert_eq!(parse(FlagTable::Open, "577"), Some(577));
        assert_eq!(parse(FlagTable::Open, "0x241"), Some(0x241));
        assert_eq!(parse(FlagTable::Mode, "0o755"), Some(0o755));
        assert_eq!(parse(FlagTable::Mode, "S_IRWXU|S_IRGRP"), Some(0o740));
        assert_eq!(parse(FlagTable::SocketFamily, "AF_LOCAL"), Some(1));
        assert_eq!(parse(FlagTable::PtraceRequest, "PTRACE_ATTACH"), Some(16));
        assert_eq!(
            parse(FlagTable::PtraceRequest, "PTRACE_ATTACH|PTRACE_DETACH"),
            None
        );
        assert_eq!(parse(FlagTable::Open, "O_BOGUS"), None);
        assert_eq!(parse(FlagTable::Open, ""), None);
        assert_eq!(parse(FlagTable::Open, "O_CREAT|"), None);
        assert_eq!(parse(FlagTable::None, "O_CREAT"), None);
        assert_eq!(parse(FlagTable::None, "-1"), None);
        assert_eq!(parse(FlagTable::Signal, "SIGIOT"), Some(6));
    }

    #[test]
    fn every_symbol_and_combination_round_trips() {
        for table in ALL_TABLES {
            let syms: Vec<(u64, &str)> = symbols(table).collect();
            for &(value, name) in &syms {
                assert_eq!(parse(table, name), Some(value), "{table:?} {name}");
                let text = rendered(table, value);
                assert_eq!(
                    parse(table, &text),
                    Some(value),
                    "{table:?} {value:#x} as {text}"
                );
            }
            for &(value, name) in aliases(table) {
                assert_eq!(parse(table, name), Some(value), "{table:?} alias {name}");
            }
            // Unknown and combined values, including every single bit.
            let mut samples: Vec<u64> = (0..64).map(|b| 1u64 << b).collect();
            samples.extend([
                0,
                3,
                0xdead_beef,
                u64::MAX,
                0o1101,
                0x4000_0000,
                1030,
                0x4206,
            ]);
            for pair in syms.windows(2) {
                samples.push(pair[0].0 | pair[1].0);
            }
            for value in samples {
                let text = rendered(table, value);
                assert_eq!(
                    parse(table, &text),
                    Some(value),
                    "{table:?} {value:#x} as {text}"
                );
            }
        }
    }

    #[test]
    fn symbol_names_are_unique_per_table() {
        for table in ALL_TABLES {
            let mut names: Vec<&str> = symbols(table).map(|(_, n)| n).collect();
            names.extend(aliases(table).iter().map(|(_, n)| *n));
            let count = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), count, "{table:?} has a duplicate name");
        }
    }

    #[test]
    fn errno_names_round_trip() {
        assert_eq!(errno_name(1), Some("EPERM"));
        assert_eq!(errno_name(2), Some("ENOENT"));
        assert_eq!(errno_name(13), Some("EACCES"));
        assert_eq!(errno_name(133), Some("EHWPOISON"));
        assert_eq!(errno_name(0), None);
        assert_eq!(errno_name(41), None);
        assert_eq!(errno_name(-2), None);
        assert_eq!(errno_from_name("EWOULDBLOCK"), Some(11));
        assert_eq!(errno_from_name("ENOTSUP"), Some(95));
        assert_eq!(errno_from_name("ENOPE"), None);
        for &(number, name) in ERRNO {
            assert_eq!(errno_from_name(name), Some(number), "{name}");
            assert_eq!(errno_name(number), Some(name), "{number}");
        }
        let covered = (1..=133).filter(|n| errno_name(*n).is_some()).count();
        assert_eq!(
            covered, 131,
            "every errno but the unused 41 and 58 has a name"
        );
    }
}
