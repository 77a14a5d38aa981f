/* A TCP relay on 127.0.0.1:port to one target address, so the embedded
 * broker (whose brokers listen on ports the system picks) can be reached
 * at a fixed bootstrap port. */
#ifndef LT_KAFKA_RELAY_H
#define LT_KAFKA_RELAY_H

typedef struct lt__relay lt__relay;

/* Listens on 127.0.0.1:port (1..65535) and forwards every connection to
 * target "127.0.0.1:P", both ways, until closed. LT_EIO naming the port if
 * it cannot be bound. */
int lt__relay_open(lt__relay **out, int port, const char *target);
/* Stops accepting, drops the open connections, joins the threads, frees.
 * NULL is a no-op. */
void lt__relay_close(lt__relay *r);

#endif
