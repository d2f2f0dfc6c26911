/*
 * lwk_forbidden.c - the node contract holds: no network socket, no new process, but threads,
 * AF_UNIX socket pairs and memory work. Prints "OK lwk_forbidden" and exits 0 when
 * socket(AF_INET) and fork() fail with EPERM and no interface but a down "lo" exists.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void *thread_main(void *arg) { return arg; }

int main(void) {
    int fails = 0;
    errno = 0;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s >= 0 || errno != EPERM) {
        fprintf(stderr, "socket(AF_INET) gave %d (%s), expected EPERM\n", s, strerror(errno));
        fails++;
    }
    errno = 0;
    pid_t p = fork();
    if (p == 0) _exit(0);
    if (p >= 0 || errno != EPERM) {
        fprintf(stderr, "fork() gave %d (%s), expected EPERM\n", (int)p, strerror(errno));
        fails++;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        fprintf(stderr, "socketpair(AF_UNIX) failed: %s\n", strerror(errno));
        fails++;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) != 0 || pthread_join(t, NULL) != 0) {
        fprintf(stderr, "a thread could not be started\n");
        fails++;
    }
    /* The namespace's interfaces (if_nameindex would need a netlink socket). */
    FILE *f = fopen("/proc/net/dev", "r");
    char line[512];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon || ++n == 0) continue;
        *colon = 0;
        char *name = line;
        while (*name == ' ') name++;
        if (strcmp(name, "lo") != 0) {
            fprintf(stderr, "network interface %s is visible\n", name);
            fails++;
        }
    }
    if (f) fclose(f);
    if (fails) return 1;
    printf("OK lwk_forbidden\n");
    return 0;
}
