// Package observe holds what the server observes about itself, as data
// structures that know nothing of requests: each command's call counts
// and latency histogram (INFO commandstats and latencystats, LATENCY
// HISTOGRAM, the metrics endpoint's duration histograms), the error
// replies by code (INFO errorstats), the slow log (SLOWLOG) and the
// latency monitor's events (LATENCY), with the texts LATENCY DOCTOR and
// LATENCY GRAPH show, which depend on the events and a few settings only;
// and the process's own figures INFO and MEMORY STATS report: the
// runtime's and the kernel's memory and CPU counts, the startup and peak
// marks of used_memory, and byte counts written as Redis writes them.
//
// Package commands decides what to record, records it after each command
// and answers the commands that read it; recording allocates nothing
// once a command has been timed on its stripe and an error's code is
// known. Only a slow command, which the slow log keeps, allocates.
package observe
