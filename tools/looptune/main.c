/* looptune: the command dispatcher. One file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#ifndef LT_VERSION
#define LT_VERSION "unknown"
#endif
#ifndef LT_GIT_COMMIT
#define LT_GIT_COMMIT "unknown"
#endif
/* The kernels' ISA paths in this build: the AVX ones exist for x86-64 alone. */
#if defined(__x86_64__)
#define LT_ISA_PATHS "portable, avx2, avx2+avxvnni, avx512"
#else
#define LT_ISA_PATHS "portable"
#endif

/* looptune --version, looptune version: what this binary is. */
static int version(void) {
    printf("looptune %s (commit %s)\n", LT_VERSION, LT_GIT_COMMIT);
    printf("ISA paths: %s (this CPU runs up to %s%s)\n", LT_ISA_PATHS,
           lt_isa_name(lt_isa_detect()), lt_cpu()->avxvnni ? ", with AVX-VNNI" : "");
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", lt_cmd_run, "generate text with a model and print a performance summary"},
    {"chat", lt_cmd_chat, "chat with a model in the terminal, formatted with its chat template"},
    {"bench", lt_cmd_bench, "decode benchmark with the machine's memory bandwidth as the ceiling"},
    {"tune", lt_cmd_tune, "search kernel and executor parameters; best ones go to the config store"},
    {"model-gen", lt_cmd_modelgen, "write a random-weight Llama model (GGUF) of a preset shape"},
    {"quantize", lt_cmd_quantize, "rewrite a GGUF model's weights in a quantisation type or mix"},
    {"broker", lt_cmd_broker, "run the embedded development Kafka broker (in memory)"},
    {"tail", lt_cmd_tail, "print the looptune records of a Kafka topic as JSON lines"},
    {"optimizer", lt_cmd_optimizer, "the online optimizer service: telemetry in, better parameters out"},
    {"top", lt_cmd_top, "live per-kernel view of running programs from the telemetry topic"},
    {"tokenize", lt_cmd_tokenize, "token ids of a text under a model's vocabulary, as llama-tokenize prints them"},
    {"worker", lt_cmd_worker, "a distributed worker: runs tasks from Kafka, results exactly once"},
    {"submit", lt_cmd_submit, "a distributed job over the workers: matmul (C.npy = A.npy B.npy), tune"},
    {"hpo", lt_cmd_hpo, "hyperparameter search of a command or a built-in objective (GP, TPE, random)"},
    {"jobs", lt_cmd_jobs, "the distributed jobs and live workers, as the Kafka topics tell them"},
    {"serve", lt_cmd_serve, "a stream-inference worker: requests from Kafka, completions streamed exactly once"},
    {"gateway", lt_cmd_gateway, "the OpenAI-compatible HTTP gateway: requests to Kafka, completions streamed back"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: looptune COMMAND [options]   (looptune COMMAND --help for its options)\n\n"
               "looptune keeps tensor programs fast: it runs Llama-family decoders on CPUs as\n"
               "programs of measured kernels.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  %-10s %s\n", "version", "the version, the git commit and the ISA paths built in "
                                         "(also --version)");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (lt_isa_env_check() != LT_OK) {
        fprintf(stderr, "looptune: %s\n", lt_errmsg());
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) return version();
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "looptune: unknown command '%s' (see looptune --help)\n", argv[1]);
    return 2;
}
