/* The Kafka options every command that talks to a cluster shares: --brokers,
 * -X key=value, --kafka-config FILE and --topic-prefix P, their checks, their
 * errors and their help lines. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int lt_cli_kafka_init(const char *cmd, lt_cli_kafka *k) {
    memset(k, 0, sizeof *k);
    if (lt_kafka_props_init(&k->props)) return lt_cli_fail(cmd, "out of memory");
    k->conn.props = k->props;
    return 0;
}

void lt_cli_kafka_free(lt_cli_kafka *k) {
    lt_kafka_props_free(k->props);
    k->props = NULL;
    k->conn.props = NULL;
}

int lt_cli_kafka_option(const char *cmd, int c, const char *arg, lt_cli_kafka *k) {
    switch (c) {
    case LT_CLI_O_BROKERS: k->conn.brokers = arg; return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_TOPIC_PREFIX: k->topic_prefix = arg; return LT_CLI_OPT_HANDLED;
    case 'X':
        if (lt_kafka_props_parse(k->props, arg)) return lt_cli_fail(cmd, "%s", lt_errmsg());
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_KAFKA_CONFIG:
        if (lt_kafka_props_load(k->props, arg)) return lt_cli_fail(cmd, "%s", lt_errmsg());
        return LT_CLI_OPT_HANDLED;
    default: return LT_CLI_OPT_NOT_MINE;
    }
}

bool lt_cli_kafka_given(const lt_cli_kafka *k) {
    return k->conn.brokers || lt_kafka_props_count(k->props) || k->topic_prefix;
}

int lt_cli_kafka_refuse(const char *cmd, const lt_cli_kafka *k, const char *what) {
    if (!lt_cli_kafka_given(k)) return 0;
    return lt_cli_fail(cmd, "--brokers, -X, --kafka-config and --topic-prefix need %s", what);
}

bool lt_cli_kafka_has_brokers(const lt_cli_kafka *k) {
    const char *bs = lt_kafka_props_get(k->props, "bootstrap.servers");
    return (k->conn.brokers && *k->conn.brokers) || (bs && *bs);
}

int lt_cli_kafka_check(const char *cmd, const lt_cli_kafka *k) {
    if (lt_kafka_props_check(k->props)) return lt_cli_fail(cmd, "%s", lt_errmsg());
    return 0;
}

int lt_cli_kafka_require(const char *cmd, const lt_cli_kafka *k, const char *why) {
    if (!lt_cli_kafka_has_brokers(k))
        return why ? lt_cli_fail(cmd, "no broker: give --brokers HOST:PORT (%s)", why)
                   : lt_cli_fail(cmd, "no broker: give --brokers HOST:PORT");
    return lt_cli_kafka_check(cmd, k);
}

const char *lt_cli_kafka_prefix(const lt_cli_kafka *k) {
    return k->topic_prefix ? k->topic_prefix : LT_KAFKA_TOPIC_PREFIX;
}

void lt_cli_kafka_help(const char *head, int col, bool prefix, const char *tail) {
    static const char *const lines[][2] = {
        {"  -X  key=value", "librdkafka property, repeatable (SASL/SSL, tuning)"},
        {"      --kafka-config FILE", "librdkafka properties file: key=value lines, '#' comments"},
        {"      --topic-prefix P", "topic names start with P (default looptune.)"},
    };
    fputs(head, stdout);
    for (int i = 0; i < (prefix ? 3 : 2); i++) {
        int pad = col - (int)strlen(lines[i][0]);
        printf("%s%*s%s\n", lines[i][0], pad < 1 ? 1 : pad, "", lines[i][1]);
    }
    fputs(tail, stdout);
}
