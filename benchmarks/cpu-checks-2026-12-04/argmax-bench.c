/* argmax-bench.c — frigg_argmax before and after keeping the best value in a register (cpu_ops.c), 8 rows of
 * 262,144 random floats, 100 times: both must give the same ids (the sum printed), the time per 8 rows. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static int am_old(const float *x, int n){ int best=0; for(int i=1;i<n;i++) if(x[i]>x[best]) best=i; return best;}
static int am_new(const float *x, int n){ int best=0; float bv=x[0]; for(int i=1;i<n;i++) if(x[i]>bv){bv=x[i];best=i;} return best;}
int main(void){ int V=262144; float *x=malloc(V*4*8); for(int i=0;i<V*8;i++) x[i]=(float)rand()/RAND_MAX;
 for(int f=0;f<2;f++){ struct timespec a,b; clock_gettime(CLOCK_MONOTONIC,&a); long s=0; for(int r=0;r<100;r++) for(int k=0;k<8;k++) s+=(f?am_new:am_old)(x+(size_t)k*V,V);
 clock_gettime(CLOCK_MONOTONIC,&b); printf("%s %.3f ms per 8 rows (%ld)\n",f?"new":"old",((b.tv_sec-a.tv_sec)*1e3+(b.tv_nsec-a.tv_nsec)/1e6)/100,s);} }
