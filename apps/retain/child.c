/* child.c - interleaved update programs (--block), each in a child
 * process of its own, taking turns block by block.
 *
 * A pool maps at the address it was made at, so copies of one pool cannot
 * be open in one process: each child opens its pool, then runs the blocks
 * the parent sends and answers each with its counters; one child runs at
 * a time. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "retain.h"

struct block_cmd {
    size_t from, to; /* from > to: close and exit */
};

/* All n bytes through the pipe, out (write) or in (read). */
static void xfer(int fd, void *buf, size_t n, int out)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = out ? write(fd, (char *)buf + done, n - done)
                        : read(fd, (char *)buf + done, n - done);
        if (r <= 0) {
            fprintf(stderr, "retain: pipe to an interleaved program broke\n");
            fail_exit();
        }
        done += (size_t)r;
    }
}

static _Noreturn void child_serve(struct child *c, int cmd, int ans, const uint32_t *keys,
                                  size_t want)
{
    for (;;) {
        struct block_cmd b;
        xfer(cmd, &b, sizeof b, 0);
        if (b.from > b.to) {
            prog_close(&c->g, want);
            xfer(ans, &c->g, sizeof c->g, 1);
            _exit(0);
        }
        prog_ops(&c->g, keys, b.from, b.to);
        xfer(ans, &c->g, sizeof c->g, 1);
    }
}

void child_start(struct child *c, const char *what, const char *path, const txn_layout *lay,
                 const struct node_layout *L, unsigned nb, const uint32_t *keys, size_t want)
{
    int to[2], from[2];
    if (pipe(to) || pipe(from))
        die("pipe", TXN_E_IO);
    fflush(stdout);
    c->pid = fork();
    if (c->pid < 0)
        die("fork", TXN_E_IO);
    if (c->pid == 0) {
        close(to[1]);
        close(from[0]);
        prog_open(&c->g, what, path, lay, L, nb);
        child_serve(c, to[0], from[1], keys, want);
    }
    close(to[0]);
    close(from[1]);
    c->cmd = to[1];
    c->ans = from[0];
    c->g = (struct prog){.what = what};
}

void child_run(struct child *c, size_t from, size_t to)
{
    struct block_cmd b = {from, to};
    xfer(c->cmd, &b, sizeof b, 1);
    xfer(c->ans, &c->g, sizeof c->g, 0);
}

void child_end(struct child *c)
{
    int st;
    child_run(c, 1, 0);
    close(c->cmd);
    close(c->ans);
    if (waitpid(c->pid, &st, 0) != c->pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "retain: %s failed\n", c->g.what);
        fail_exit();
    }
}
