/* test_port.h: a free loopback TCP port, for tests whose ranks meet over sockets. */
#ifndef OX_TEST_PORT_H
#define OX_TEST_PORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* A port no one listens on now (the kernel's pick for a socket closed again); 0 on failure. */
static inline int test_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             getsockname(fd, (struct sockaddr *)&a, &l) == 0;
    if (fd >= 0)
        close(fd);
    return ok ? ntohs(a.sin_port) : 0;
}

#endif
