/* `looptune broker` run as a program: prints its bootstrap address as one
 * line on stdout, says on stderr that it is in memory, serves producers and
 * consumers of other processes, and exits 0 on SIGTERM. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "kafka_test.h"
#include "looptune/kafka.h"
#include "test.h"

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sin;
    bind(fd, (struct sockaddr *)&sin, sizeof sin);
    getsockname(fd, (struct sockaddr *)&sin, &len);
    close(fd);
    return ntohs(sin.sin_port);
}

/* Reads one line from fd within timeout_ms. */
static bool read_line(int fd, char *buf, size_t n, int timeout_ms) {
    size_t len = 0;
    uint64_t deadline = lt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (len + 1 < n && lt_now_ns() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t r = read(fd, buf + len, 1);
        if (r <= 0) return false;
        if (buf[len] == '\n') {
            buf[len] = 0;
            return true;
        }
        len++;
    }
    return false;
}

int main(void) {
    const char *bin = getenv("LT_BIN");
    if (!bin) {
        fprintf(stderr, "LT_BIN (the looptune binary) is not set; ctest sets it\n");
        return 1;
    }
    char err_path[512], port_s[16];
    snprintf(err_path, sizeof err_path, "%s/broker-%ld.err", kt_work_dir(), (long)getpid());
    int port = free_port();
    snprintf(port_s, sizeof port_s, "%d", port);
    int pipefd[2];
    LT_ASSERT(pipe(pipefd) == 0);
    pid_t pid = fork();
    LT_ASSERT(pid >= 0);
    if (pid == 0) {
        dup2(pipefd[1], 1);
        close(pipefd[0]);
        close(pipefd[1]);
        if (!freopen(err_path, "w", stderr)) _exit(126);
        execl(bin, bin, "broker", "--port", port_s, "--brokers-count", "2", (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);

    char line[128] = "", want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    ASSERT_TRUE(read_line(pipefd[0], line, sizeof line, 10000));
    ASSERT_STREQ(line, want);

    /* another client, through the printed address */
    lt_producer *p;
    lt_producer_opts po = {.conn = {.brokers = line}, .topic = "cli-broker"};
    ASSERT_EQ(lt_producer_open(&p, &po), LT_OK);
    for (int i = 0; i < 25; i++) ASSERT_EQ(lt_producer_send(p, "k", 1, "hello", 5), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    lt_producer_close(p);
    const char *topic = "cli-broker";
    lt_consumer *c;
    lt_consumer_opts co = {.conn = {.brokers = line}, .group = "cli", .topics = &topic,
                           .n_topics = 1, .from_beginning = true};
    ASSERT_EQ(lt_consumer_open(&c, &co), LT_OK);
    int got = 0;
    uint64_t deadline = lt_now_ns() + 20000000000ull;
    while (got < 25 && lt_now_ns() < deadline) {
        lt_record r;
        if (lt_consumer_poll(c, 500, &r) == 1) got += r.len == 5 && !memcmp(r.value, "hello", 5);
    }
    ASSERT_EQ(got, 25);
    lt_consumer_close(c);

    kill(pid, SIGTERM);
    int status = -1;
    for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; i++) {
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    if (waitpid(pid, &status, WNOHANG) == 0) { /* still running: fail, clean up */
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ASSERT_TRUE(!"looptune broker did not stop on SIGTERM within 10 s");
    }
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *err = kt_slurp(err_path);
    ASSERT_TRUE(err && strstr(err, "in memory, not durable"));
    free(err);
    remove(err_path);
    close(pipefd[0]);
    return lt_test_finish();
}
