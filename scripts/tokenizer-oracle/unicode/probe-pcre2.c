/* probe-pcre2.c — the PCRE2 side of probe_hf.py: piece counts of the four probe strings per code point
 * under tok_mistral_regex compiled with PCRE2 (UTF+UCP). Build: see gen-delta. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
extern const char tok_mistral_regex[];
static pcre2_code *re; static pcre2_match_data *md;
static size_t put(char *o, uint32_t cp){ if(cp<0x80){o[0]=cp;return 1;} if(cp<0x800){o[0]=0xC0|(cp>>6);o[1]=0x80|(cp&63);return 2;}
 if(cp<0x10000){o[0]=0xE0|(cp>>12);o[1]=0x80|((cp>>6)&63);o[2]=0x80|(cp&63);return 3;}
 o[0]=0xF0|(cp>>18);o[1]=0x80|((cp>>12)&63);o[2]=0x80|((cp>>6)&63);o[3]=0x80|(cp&63);return 4;}
static int pieces(const char *s, size_t n){ size_t prev=0,pos=0; int k=0;
 while(pos<=n){ int rc=pcre2_match(re,(PCRE2_SPTR)s,n,pos,0,md,NULL); if(rc<0)break; PCRE2_SIZE*ov=pcre2_get_ovector_pointer(md);
  if(ov[0]!=prev)k++; k++; prev=ov[1]; pos=ov[1]>ov[0]?ov[1]:ov[1]+1; }
 if(prev!=n)k++; return k; }
int main(void){ int e; PCRE2_SIZE off; re=pcre2_compile((PCRE2_SPTR)tok_mistral_regex,PCRE2_ZERO_TERMINATED,PCRE2_UTF|PCRE2_UCP,&e,&off,NULL); md=pcre2_match_data_create(4,NULL);
 uint32_t R[2][2]={{0,0x3FFFF},{0xE0000,0xE0FFF}};
 for(int r=0;r<2;r++) for(uint32_t cp=R[r][0];cp<=R[r][1];cp++){ if(cp>=0xD800&&cp<=0xDFFF)continue; if(cp==0x20)continue;
  char c[4]; size_t cn=put(c,cp); char b[32]; size_t n;
  int t[5];
  n=0; memcpy(b,"!!",2); n=2; memcpy(b+n,c,cn); n+=cn; t[0]=pieces(b,n);
  n=0; memcpy(b,c,cn); n=cn; memcpy(b+n,"Aa",2); n+=2; t[1]=pieces(b,n);
  n=0; b[0]='a'; n=1; memcpy(b+n,c,cn); n+=cn; b[n++]='a'; t[2]=pieces(b,n);
  n=0; memcpy(b,c,cn); memcpy(b+cn,c,cn); n=2*cn; t[3]=pieces(b,n);
  n=0; b[0]='!'; n=1; memcpy(b+n,c,cn); n+=cn; b[n++]='a'; t[4]=pieces(b,n);
  printf("%x %d%d%d%d%d\n",cp,t[0],t[1],t[2],t[3],t[4]); } }
