//! iopath: a Linux kernel I/O path profiler. The binary is a thin shell over this library.

pub mod aggregate;
pub mod cli;
pub mod compare;
pub mod doctor;
pub mod events;
pub mod flame;
pub mod hist;
pub mod input;
pub mod job;
pub mod loadgen;
pub mod model;
pub mod output;
pub mod pb;
pub mod perfetto;
pub mod probe;
pub mod report;
pub mod stop;
pub mod sweep;
pub mod sweep_compare;
pub mod syscall_names;
pub mod sysconf;
pub mod timeseries;
pub mod top;
pub mod trace;
pub mod untrusted;
pub mod watchdog;
