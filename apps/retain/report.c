/* report.c - the two experiments and their markdown tables: every kernel,
 * layout change and input; the working-set sweep (DEL of a fraction of
 * the keys, Layout-Change). */
#include <stdio.h>
#include <stdlib.h>

#include "retain.h"

static const char *const input_name[] = {"INS", "DEL", "RAND"};

/* The original's and the update's keys, g_opt.n each. */
static void inputs_alloc(uint32_t **orig, uint32_t **upd)
{
    *orig = malloc(g_opt.n * 4);
    *upd = malloc(g_opt.n * 4);
    if (!*orig || !*upd)
        die("input", TXN_E_NOMEM);
}

/* "X.Yx", retention bytes of the manual model against the automatic's. */
static void bytes_ratio(char *buf, size_t cap, uint64_t retain, double auto_bytes,
                        const char *none)
{
    if (auto_bytes > 0)
        snprintf(buf, cap, "%.1fx", (double)retain / auto_bytes);
    else
        snprintf(buf, cap, "%s", none);
}

static void print_table_head(void)
{
    printf("| kernel | layout | input | runs | P-Original ms | P-Retain ms | P-Manual ms | P-Auto ms "
           "| P-Original' ms | Manual overhead | Auto overhead, CPU [quartiles] | Auto overhead, "
           "wall [quartiles] | Auto/P-Original', CPU [quartiles] | Auto/P-Original', wall "
           "[quartiles] | bytes P-Retain | bytes P-Manual | bytes P-Auto | retention bytes "
           "Manual/Auto |\n");
    printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
}

static void print_table_row(enum kind kd, int change, enum input in, const struct measure *m)
{
    char ratio[32];
    char same_t[32] = "-", same_c[64] = "-", same_w[64] = "-";
    bytes_ratio(ratio, sizeof ratio, m->b_retain,
                m->b_auto > m->b_manual ? (double)(m->b_auto - m->b_manual) : 0, "Auto: none");
    if (m->same) {
        snprintf(same_t, sizeof same_t, "%.1f", m->t_same * 1e3);
        snprintf(same_c, sizeof same_c, "%.2f%% [%.2f, %.2f]", 100 * m->lx_cpu[1],
                 100 * m->lx_cpu[0], 100 * m->lx_cpu[2]);
        snprintf(same_w, sizeof same_w, "%.2f%% [%.2f, %.2f]", 100 * m->lx_wall[1],
                 100 * m->lx_wall[0], 100 * m->lx_wall[2]);
    }
    printf("| %s | %s | %s | %u | %.1f | %.1f | %.1f | %.1f | %s | %.2f%% "
           "| %.2f%% [%.2f, %.2f] | %.2f%% [%.2f, %.2f] | %s | %s | %llu | %llu | %llu "
           "| %s |\n",
           kernel_of(kd)->name, change ? "Layout-Change" : "Layout-Add", input_name[in], m->reps,
           m->t_orig * 1e3, m->t_retain * 1e3, m->t_manual * 1e3, m->t_auto * 1e3, same_t,
           100 * m->t_retain / m->t_manual, 100 * m->ov_cpu[1], 100 * m->ov_cpu[0],
           100 * m->ov_cpu[2], 100 * m->ov_wall[1], 100 * m->ov_wall[0], 100 * m->ov_wall[2],
           same_c, same_w, (unsigned long long)m->b_retain, (unsigned long long)m->b_manual,
           (unsigned long long)m->b_auto, ratio);
    fflush(stdout);
}

void report_table(int kmask)
{
    uint32_t *orig, *upd;
    inputs_alloc(&orig, &upd);
    print_table_head();
    for (int kd = 0; kd < KINDS; kd++) {
        if (!(kmask & 1 << kd))
            continue;
        for (int change = 1; change >= 0; change--)
            for (int in = INS; in <= RAND; in++) {
                struct node_layout L1, L2, La;
                struct measure m = {0};
                size_t want;
                unsigned reps = change || !g_opt.reps_add ? g_opt.reps : g_opt.reps_add;
                layouts_for(kd, change, &L1, &L2, &La);
                make_input(in, g_opt.n, orig, upd, &want, g_opt.n);
                p_original(&L1, orig, g_opt.n, &m.t_orig, &m.b_orig);
                p_update(&L1, &L2, &La, orig, upd, g_opt.n, want, reps, !change, &m);
                print_table_row(kd, change, in, &m);
            }
    }
    free(orig);
    free(upd);
}

/* The manual model pays the whole migration, the automatic one the nodes
 * the deletions touch: Auto cost is the median of the runs' paired
 * differences T(P-Auto) - T(P-Manual); its bytes, what P-Auto stores
 * beyond P-Manual. */
static void print_sweep_row(enum kind kd, double frac, size_t n, const struct measure *m)
{
    double auto_cost = m->d_auto;
    double auto_bytes = (double)m->b_auto - (double)m->b_manual;
    char rt[48], rb[48];
    if (auto_cost > 0)
        snprintf(rt, sizeof rt, "%.1fx", m->t_retain / auto_cost);
    else
        snprintf(rt, sizeof rt, "Auto: none measurable");
    bytes_ratio(rb, sizeof rb, m->b_retain, auto_bytes, "Auto: none");
    printf("| %s | %.1f%% (%zu) | %.2f | %.2f | %.2f | %.2f | %.3f | %s | %s |\n",
           kernel_of(kd)->name, frac * 100, n, m->t_retain * 1e3, m->t_manual * 1e3,
           m->t_auto * 1e3, m->t_retain * 1e3, auto_cost * 1e3, rt, rb);
    fflush(stdout);
}

void report_sweep(int kmask)
{
    static const double frac[] = {0.001, 0.01, 0.1, 1.0};
    uint32_t *orig, *upd;
    inputs_alloc(&orig, &upd);
    printf("| kernel | keys deleted | P-Retain ms | P-Manual ms | P-Auto ms | Manual cost ms "
           "| Auto cost ms | Manual/Auto time | Manual/Auto bytes |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int kd = 0; kd < KINDS; kd++) {
        if (!(kmask & 1 << kd))
            continue;
        struct node_layout L1, L2, La;
        size_t want;
        double t;
        uint64_t bytes;
        layouts_for(kd, 1, &L1, &L2, &La);
        make_input(DEL, g_opt.n, orig, upd, &want, g_opt.n);
        p_original(&L1, orig, g_opt.n, &t, &bytes);
        for (int i = 0; i < 4; i++) {
            struct measure m = {0};
            size_t n = (size_t)(frac[i] * (double)g_opt.n + 0.5);
            p_update(&L1, &L2, &La, orig, upd, n, n, g_opt.reps, 0, &m);
            print_sweep_row(kd, frac[i], n, &m);
        }
    }
    free(orig);
    free(upd);
}
