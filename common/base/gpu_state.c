/* gpu_state.c — see gpu_state.h. */
#include "gpu_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line nvidia-smi prints for `query` on `device`, or "" (line holds n bytes). */
static void smi_line(int device, const char *query, char *line, size_t n) {
    char cmd[192];
    line[0] = 0;
    snprintf(cmd, sizeof cmd, "nvidia-smi --query-gpu=%s --format=csv,noheader,nounits -i %d 2>/dev/null", query, device);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (!fgets(line, (int)n, p)) line[0] = 0;
    pclose(p);
}

int frigg_gpu_state_read(int device, frigg_gpu_state *st) {
    char line[256];
    snprintf(st->name, sizeof st->name, "unknown");
    st->sm_clock_mhz = st->mem_clock_mhz = st->temp_c = -1;
    smi_line(device, "name,clocks.sm,clocks.mem,temperature.gpu", line, sizeof line);
    char *f[4] = {0};
    int k = 0;
    for (char *save = NULL, *t = strtok_r(line, ",\n", &save); t && k < 4; t = strtok_r(NULL, ",\n", &save)) f[k++] = t;
    if (k != 4) return -1;
    while (*f[0] == ' ') f[0]++;
    snprintf(st->name, sizeof st->name, "%s", f[0]);
    st->sm_clock_mhz = atoi(f[1]);
    st->mem_clock_mhz = atoi(f[2]);
    st->temp_c = atoi(f[3]);
    return 0;
}

int frigg_gpu_temp(int device) {
    char line[64];
    smi_line(device, "temperature.gpu", line, sizeof line);
    char *end;
    long t = strtol(line, &end, 10);
    return end == line || t < 0 || t > 200 ? -1 : (int)t;
}

void frigg_gpu_state_json(const frigg_gpu_state *st, char *out, size_t n) {
    snprintf(out, n, "\"gpu\":\"%s\",\"sm_clock_mhz\":%d,\"mem_clock_mhz\":%d,\"temp_c\":%d", st->name, st->sm_clock_mhz,
             st->mem_clock_mhz, st->temp_c);
}
