/* epoll_race.c: an LD_PRELOAD library for test_serve_shutdown.py that makes a libmicrohttpd race
 * lose every time. MHD_quiesce_daemon (called on the main thread) removes the listening socket
 * from each of the daemon's epoll sets, while an awake HTTP thread that sees the daemon quiesced
 * removes it from its own set too; whichever comes second gets ENOENT, and the main thread's
 * ENOENT is an MHD_PANIC (abort). Here the main thread's removal of a listening socket waits
 * (up to 2 s) until another thread has removed it from that set. A server that never quiesces
 * is not slowed at all. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_FD 4096

static int (*real_epoll_ctl)(int, int, int, struct epoll_event *);
static atomic_bool removed[MAX_FD]; /* by epoll set: another thread removed a listening socket */

__attribute__((constructor)) static void find_real(void) {
    *(void **)&real_epoll_ctl = dlsym(RTLD_NEXT, "epoll_ctl");
}

static bool listening(int fd) {
    int on = 0;
    socklen_t n = sizeof on;
    return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &n) == 0 && on;
}

__attribute__((visibility("default"))) int epoll_ctl(int epfd, int op, int fd,
                                                     struct epoll_event *ev) {
    if (op != EPOLL_CTL_DEL || epfd < 0 || epfd >= MAX_FD || !listening(fd))
        return real_epoll_ctl(epfd, op, fd, ev);
    if (syscall(SYS_gettid) != getpid()) { /* an HTTP thread */
        int rc = real_epoll_ctl(epfd, op, fd, ev);
        atomic_store(&removed[epfd], true);
        return rc;
    }
    for (int ms = 0; ms < 2000 && !atomic_load(&removed[epfd]); ms++)
        usleep(1000);
    return real_epoll_ctl(epfd, op, fd, ev);
}
