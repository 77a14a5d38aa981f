/* looptune: command dispatch. */
#include "looptune/core.h"
#include <stdio.h>
int main(int argc, char **argv) {
    (void)argc; (void)argv;
    char fp[512];
    lt_host_fingerprint(fp, sizeof fp);
    printf("%s\n", fp);
    return 0;
}
