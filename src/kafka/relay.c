/* The fixed-port relay of the embedded broker: an accept thread on
 * 127.0.0.1:port and one thread per connection copying bytes both ways to
 * the target. Only bootstrap traffic passes here (metadata points clients
 * at the brokers' own ports), so a thread per connection is plenty. */
#include "relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "looptune/core.h"

typedef struct pair {
    int a, b; /* client side, broker side */
    pthread_t thread;
    _Atomic bool done; /* the thread has finished: join and free it */
    struct lt__relay *relay;
    struct pair *next;
} pair;

struct lt__relay {
    int lfd;
    int wake[2]; /* written once at close: every poll set includes wake[0] */
    struct sockaddr_in target;
    pthread_t acceptor;
    pthread_mutex_t mu; /* guards pairs */
    pair *pairs;
};

/* Writes all of buf; false on error or a closed peer. */
static bool write_all(int fd, const char *buf, size_t n) {
    while (n) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        buf += w;
        n -= (size_t)w;
    }
    return true;
}

static void *pair_main(void *arg) {
    pair *p = arg;
    char buf[65536];
    struct pollfd fds[3] = {{.fd = p->a, .events = POLLIN},
                            {.fd = p->b, .events = POLLIN},
                            {.fd = p->relay->wake[0], .events = POLLIN}};
    for (;;) {
        if (poll(fds, 3, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (fds[2].revents) break;
        int from = -1, to = -1;
        if (fds[0].revents) from = p->a, to = p->b;
        else if (fds[1].revents) from = p->b, to = p->a;
        else continue;
        ssize_t r = recv(from, buf, sizeof buf, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || !write_all(to, buf, (size_t)r)) break;
    }
    shutdown(p->a, SHUT_RDWR);
    shutdown(p->b, SHUT_RDWR);
    atomic_store(&p->done, true);
    return NULL;
}

/* Joins and frees the pairs whose connections have ended (acceptor thread). */
static void reap(lt__relay *r) {
    pthread_mutex_lock(&r->mu);
    for (pair **pp = &r->pairs; *pp;) {
        pair *p = *pp;
        if (!atomic_load(&p->done)) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        pthread_join(p->thread, NULL);
        close(p->a);
        close(p->b);
        free(p);
    }
    pthread_mutex_unlock(&r->mu);
}

static void *accept_main(void *arg) {
    lt__relay *r = arg;
    struct pollfd fds[2] = {{.fd = r->lfd, .events = POLLIN}, {.fd = r->wake[0], .events = POLLIN}};
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (fds[1].revents) break;
        reap(r);
        int a = accept(r->lfd, NULL, NULL);
        if (a < 0) continue;
        int b = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        if (b < 0 || connect(b, (struct sockaddr *)&r->target, sizeof r->target) < 0) {
            /* the broker is down: the client sees its connection closed */
            if (b >= 0) close(b);
            close(a);
            continue;
        }
        setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pair *p = calloc(1, sizeof *p);
        if (!p) {
            close(a);
            close(b);
            continue;
        }
        p->a = a;
        p->b = b;
        p->relay = r;
        if (pthread_create(&p->thread, NULL, pair_main, p)) {
            close(a);
            close(b);
            free(p);
            continue;
        }
        pthread_mutex_lock(&r->mu);
        p->next = r->pairs;
        r->pairs = p;
        pthread_mutex_unlock(&r->mu);
    }
    return NULL;
}

int lt__relay_open(lt__relay **out, int port, const char *target) {
    *out = NULL;
    const char *colon = strrchr(target, ':');
    int tport = colon ? atoi(colon + 1) : 0;
    if (port < 1 || port > 65535 || tport < 1 || tport > 65535)
        return lt_error(LT_EINVAL, "relay: bad port %d or target '%s'", port, target);
    lt__relay *r = calloc(1, sizeof *r);
    if (!r) return lt_error(LT_ENOMEM, "relay: out of memory");
    r->lfd = -1;
    r->wake[0] = r->wake[1] = -1;
    pthread_mutex_init(&r->mu, NULL);
    r->target.sin_family = AF_INET;
    r->target.sin_port = htons((uint16_t)tport);
    r->target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1, rc;
    if ((r->lfd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
        setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(r->lfd, (struct sockaddr *)&sin, sizeof sin) < 0 || listen(r->lfd, 16) < 0) {
        rc = lt_error(LT_EIO, "cannot listen on 127.0.0.1:%d: %s", port, strerror(errno));
        goto fail;
    }
    if (pipe(r->wake) < 0) {
        rc = lt_error(LT_EIO, "relay: pipe: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&r->acceptor, NULL, accept_main, r)) {
        rc = lt_error(LT_ENOMEM, "relay: cannot start a thread");
        goto fail;
    }
    *out = r;
    return LT_OK;
fail:
    if (r->lfd >= 0) close(r->lfd);
    if (r->wake[0] >= 0) close(r->wake[0]);
    if (r->wake[1] >= 0) close(r->wake[1]);
    pthread_mutex_destroy(&r->mu);
    free(r);
    return rc;
}

void lt__relay_close(lt__relay *r) {
    if (!r) return;
    char c = 1;
    while (write(r->wake[1], &c, 1) < 0 && errno == EINTR) {
    }
    pthread_join(r->acceptor, NULL);
    /* the acceptor is gone: the list no longer changes */
    for (pair *p = r->pairs, *next; p; p = next) {
        next = p->next;
        pthread_join(p->thread, NULL);
        close(p->a);
        close(p->b);
        free(p);
    }
    close(r->lfd);
    close(r->wake[0]);
    close(r->wake[1]);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
