/* Client properties: an ordered key -> value set filled from `-X key=value`
 * arguments and properties files, checked against librdkafka before use. */
#include "looptune/kafka.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

struct lt_kafka_props {
    char **keys; /* [n] malloc'd */
    char **vals; /* [n] malloc'd */
    size_t n, cap;
};

int lt_kafka_props_init(lt_kafka_props **out) {
    *out = calloc(1, sizeof **out);
    return *out ? LT_OK : lt_error(LT_ENOMEM, "kafka properties: out of memory");
}

void lt_kafka_props_free(lt_kafka_props *props) {
    if (!props) return;
    for (size_t i = 0; i < props->n; i++) {
        free(props->keys[i]);
        free(props->vals[i]);
    }
    free(props->keys);
    free(props->vals);
    free(props);
}

/* librdkafka keys are dotted words: letters, digits, '.', '_', '-'. */
static bool key_ok(const char *key) {
    if (!*key) return false;
    for (const char *c = key; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '.' && *c != '_' && *c != '-') return false;
    return true;
}

int lt_kafka_props_set(lt_kafka_props *props, const char *key, const char *value) {
    if (!key_ok(key))
        return lt_error(LT_EINVAL,
                        "kafka property key '%s': expected letters, digits, '.', '_', '-'", key);
    char *v = strdup(value);
    if (!v) return lt_error(LT_ENOMEM, "kafka properties: out of memory");
    for (size_t i = 0; i < props->n; i++) {
        if (!strcmp(props->keys[i], key)) {
            free(props->vals[i]);
            props->vals[i] = v;
            return LT_OK;
        }
    }
    if (props->n == props->cap) {
        size_t cap = props->cap ? 2 * props->cap : 16;
        char **k = realloc(props->keys, cap * sizeof *k);
        if (k) props->keys = k;
        char **vv = k ? realloc(props->vals, cap * sizeof *vv) : NULL;
        if (!vv) {
            free(v);
            return lt_error(LT_ENOMEM, "kafka properties: out of memory");
        }
        props->vals = vv;
        props->cap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return lt_error(LT_ENOMEM, "kafka properties: out of memory");
    }
    props->keys[props->n] = k;
    props->vals[props->n] = v;
    props->n++;
    return LT_OK;
}

/* Trims spaces at both ends of [s, s+len) in place; returns the new start. */
static char *trim(char *s, size_t len) {
    while (len && isspace((unsigned char)s[len - 1])) len--;
    s[len] = 0;
    while (isspace((unsigned char)*s)) s++;
    return s;
}

/* Splits "key=value" (a private copy) into trimmed key and value. */
static bool split_kv(char *line, char **key, char **value) {
    char *eq = strchr(line, '=');
    if (!eq) return false;
    *eq = 0;
    *key = trim(line, (size_t)(eq - line));
    *value = trim(eq + 1, strlen(eq + 1));
    return **key != 0;
}

int lt_kafka_props_parse(lt_kafka_props *props, const char *arg) {
    char *copy = strdup(arg);
    if (!copy) return lt_error(LT_ENOMEM, "kafka properties: out of memory");
    char *key, *value;
    int rc;
    if (!split_kv(copy, &key, &value))
        rc = lt_error(LT_EINVAL, "kafka property '%s': expected key=value", arg);
    else
        rc = lt_kafka_props_set(props, key, value);
    free(copy);
    return rc;
}

int lt_kafka_props_load(lt_kafka_props *props, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return lt_error(LT_EIO, "%s: cannot open: %s", path, strerror(errno));
    /* Parse into a scratch set first: a file with an error adds nothing. */
    lt_kafka_props *tmp = NULL;
    int rc = lt_kafka_props_init(&tmp);
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int64_t lineno = 0;
    while (rc == LT_OK && (got = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (memchr(line, 0, (size_t)got)) {
            rc = lt_error(LT_EFORMAT, "%s:%lld: NUL byte in the line", path, (long long)lineno);
            break;
        }
        char *s = trim(line, (size_t)got);
        if (!*s || *s == '#') continue;
        char *key, *value;
        if (!split_kv(s, &key, &value)) {
            rc = lt_error(LT_EFORMAT, "%s:%lld: expected key=value, got '%.80s'", path,
                          (long long)lineno, s);
        } else if (!key_ok(key)) {
            rc = lt_error(LT_EFORMAT, "%s:%lld: bad key '%.80s': expected letters, digits, '.', "
                          "'_', '-'", path, (long long)lineno, key);
        } else if ((rc = lt_kafka_props_set(tmp, key, value))) {
            rc = lt_error(rc, "%s:%lld: %s", path, (long long)lineno, lt_errmsg());
        }
    }
    if (rc == LT_OK && ferror(f))
        rc = lt_error(LT_EIO, "%s: read error after line %lld", path, (long long)lineno);
    free(line);
    fclose(f);
    for (size_t i = 0; rc == LT_OK && i < tmp->n; i++)
        rc = lt_kafka_props_set(props, tmp->keys[i], tmp->vals[i]);
    lt_kafka_props_free(tmp);
    return rc;
}

const char *lt_kafka_props_get(const lt_kafka_props *props, const char *key) {
    for (size_t i = 0; props && i < props->n; i++)
        if (!strcmp(props->keys[i], key)) return props->vals[i];
    return NULL;
}

size_t lt_kafka_props_count(const lt_kafka_props *props) { return props ? props->n : 0; }

void lt_kafka_props_at(const lt_kafka_props *props, size_t i, const char **key,
                       const char **value) {
    LT_ASSERT(props && i < props->n);
    *key = props->keys[i];
    *value = props->vals[i];
}

int lt_kafka_props_check(const lt_kafka_props *props) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (!conf) return lt_error(LT_ENOMEM, "kafka properties: out of memory");
    char err[512];
    int rc = LT_OK;
    for (size_t i = 0; props && i < props->n && rc == LT_OK; i++) {
        if (rd_kafka_conf_set(conf, props->keys[i], props->vals[i], err, sizeof err) !=
            RD_KAFKA_CONF_OK)
            rc = lt_error(LT_ECONFIG, "kafka property '%s': %s", props->keys[i], err);
    }
    rd_kafka_conf_destroy(conf);
    return rc;
}
