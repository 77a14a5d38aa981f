/* looptune telemetry sinks of the kafka layer: telemetry records as
 * looptune.Envelope messages, written to a file (length-delimited: a varint
 * length, then the bytes) or produced to Kafka (keyed by run id). The
 * telemetry layer knows only lt_tel_sink; these build one. */
#ifndef LOOPTUNE_TELEMETRY_SINKS_H
#define LOOPTUNE_TELEMETRY_SINKS_H

#include <stdio.h>

#include "looptune/kafka.h"
#include "looptune/telemetry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Storage for one record's protobuf-c form: the envelope and every nested
 * message point into it. Zero-initialise; free with lt_tel_pb_free. */
typedef struct {
    Looptune__Envelope env;
    Looptune__Host host;
    Looptune__RunStart run_start;
    Looptune__RunEnd run_end;
    Looptune__KernelWindow window;
    Looptune__CallSample call;
    Looptune__Param params[LT_MAX_PARAMS], *param_ptrs[LT_MAX_PARAMS];
    Looptune__Counter counters[LT_CTR_COUNT], *counter_ptrs[LT_CTR_COUNT];
    char *available[LT_CTR_COUNT];
    char *isa_flags[LT_TEL_MAX_ISA_FLAGS];
    /* the run start's node list, grown as needed */
    Looptune__KernelParams *kernels, **kernel_ptrs;
    Looptune__Param *kparams, **kparam_ptrs;
    int cap_kernels;
} lt_tel_pb;

/* Maps r to an envelope inside pb (valid until the next call with pb, or
 * lt_tel_pb_free); strings are borrowed from r. KernelWindow.counters holds
 * the window's available counters when at least one read fell in it. */
int lt_tel_record_to_envelope(const lt_tel_record *r, lt_tel_pb *pb, Looptune__Envelope **env);
void lt_tel_pb_free(lt_tel_pb *pb);

/* File sink: creates (truncates) path. Write errors are counted as failed
 * and reported once on stderr. */
int lt_tel_sink_file_open(lt_tel_sink *out, const char *path);
/* Reads the next length-delimited envelope of such a file: 1 = *env decoded
 * (free with lt_envelope_free), 0 = clean end of file, LT_EFORMAT for a
 * truncated or undecodable record (detail names the byte offset). */
int lt_tel_file_next(FILE *f, Looptune__Envelope **env);

/* Kafka sink: a producer on opts->topic; every record is keyed by run_id so
 * a run's records stay in order in one partition. Never blocks the drain:
 * a full local queue drops the record (counted). */
int lt_tel_sink_kafka_open(lt_tel_sink *out, const lt_producer_opts *opts, const char *run_id);

#ifdef __cplusplus
}
#endif
#endif
