/* alloc_hook.c: LD_PRELOAD library that records c10's CPU tensor allocations and frees.
 *
 * torch 1.13's c10::alloc_cpu (libc10.so) calls posix_memalign(&p, 64, nbytes) for every CPU
 * tensor storage and c10::free_cpu calls free(p). This library interposes on posix_memalign and
 * free. While recording is on it appends, in order, one event per posix_memalign call that
 *   - asks for >= 1 byte,
 *   - asks for 64-byte alignment (c10's gAlignment), and
 *   - comes from code inside libc10.so (return address checked against its mapped segments),
 * one event per free() of a pointer recorded earlier (even after recording is paused, so a freed
 * and reused address is never confused), and the phase marks pushed from Python (capture.py)
 * through ctypes. Allocations by oneDNN, OpenBLAS, libgomp, Python and the C++ runtime are left
 * out by the caller and alignment filters.
 *
 * No allocation happens inside the hooks: the event log and the pointer set live in mmap'd
 * memory, and the real routines are glibc's __libc_memalign/__libc_free, so there is no dlsym and
 * no recursion. A mutex makes the hooks safe for intra-op worker threads.
 *
 * Built with -DHOOK_SURVEY it also interposes malloc, calloc, realloc, aligned_alloc, memalign
 * and valloc and counts (without recording) every call of >= SURVEY_MIN bytes by routine and by
 * whether the caller is in libc10.so; capture.py --survey prints the table (README).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *p);
#ifdef HOOK_SURVEY
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
#endif

#define C10_ALIGNMENT 64
#define EV_ALLOC 1
#define EV_FREE 2
#define EV_MARK 3

typedef struct {
  uint64_t kind; /* EV_ALLOC, EV_FREE or EV_MARK */
  uint64_t ptr;  /* pointer (alloc, free); label index (mark) */
  uint64_t size; /* requested bytes (alloc); 0 otherwise */
} hook_event;

#define MAX_EVENTS (1ull << 24) /* 16M events, 384 MiB of address space, touched on use */
#define SET_BITS 21            /* pointer set: 2M slots, at most half used */
#define SET_SIZE (1ull << SET_BITS)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int g_recording = 0;
static int g_filter_caller = 1;
static hook_event *g_events = 0;
static uint64_t g_count = 0, g_dropped = 0, g_live = 0;
static uint64_t *g_set = 0; /* open addressing, linear probing, 0 = empty */
static uintptr_t g_c10_lo[8], g_c10_hi[8];
static int g_c10_n = 0;

static void *map_zeroed(size_t bytes) {
  void *p = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? 0 : p;
}

static uint64_t slot_of(uint64_t p) { return ((p >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - SET_BITS); }

static int set_insert(uint64_t p) {
  if (g_live >= SET_SIZE / 2) return 0;
  uint64_t i = slot_of(p);
  while (g_set[i] != 0 && g_set[i] != p) i = (i + 1) & (SET_SIZE - 1);
  if (g_set[i] == 0) g_live++;
  g_set[i] = p;
  return 1;
}

static int set_remove(uint64_t p) { /* backward-shift deletion keeps probe chains intact */
  uint64_t i = slot_of(p);
  while (g_set[i] != p) {
    if (g_set[i] == 0) return 0;
    i = (i + 1) & (SET_SIZE - 1);
  }
  uint64_t j = i;
  for (;;) {
    j = (j + 1) & (SET_SIZE - 1);
    if (g_set[j] == 0) break;
    uint64_t h = slot_of(g_set[j]);
    /* move g_set[j] into the hole at i unless its home slot lies cyclically in (i, j] */
    int home_in_between = (i <= j) ? (h > i && h <= j) : (h > i || h <= j);
    if (!home_in_between) {
      g_set[i] = g_set[j];
      i = j;
    }
  }
  g_set[i] = 0;
  g_live--;
  return 1;
}

static void push(uint64_t kind, uint64_t ptr, uint64_t size) {
  if (g_count >= MAX_EVENTS) { g_dropped++; return; }
  g_events[g_count].kind = kind;
  g_events[g_count].ptr = ptr;
  g_events[g_count].size = size;
  g_count++;
}

static int from_c10(const void *ret) {
  uintptr_t a = (uintptr_t)ret;
  for (int k = 0; k < g_c10_n; k++)
    if (a >= g_c10_lo[k] && a < g_c10_hi[k]) return 1;
  return 0;
}

static int find_c10(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size; (void)data;
  if (!info->dlpi_name || !strstr(info->dlpi_name, "/libc10.so")) return 0;
  for (int k = 0; k < info->dlpi_phnum && g_c10_n < 8; k++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    g_c10_lo[g_c10_n] = info->dlpi_addr + ph->p_vaddr;
    g_c10_hi[g_c10_n] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    g_c10_n++;
  }
  return 1;
}

#ifdef HOOK_SURVEY
#define SURVEY_MIN 4096
enum { R_MALLOC, R_CALLOC, R_REALLOC, R_POSIX_MEMALIGN, R_ALIGNED_ALLOC, R_MEMALIGN, R_VALLOC, R_N };
static uint64_t g_survey[R_N][2][2]; /* [routine][caller in libc10][calls, bytes] */
static uint64_t g_survey_align[2][2]; /* posix_memalign >= SURVEY_MIN: [alignment==64][calls, bytes] */
static void survey(int r, size_t n, const void *ret) {
  if (!g_recording || n < SURVEY_MIN) return;
  int c = from_c10(ret);
  __atomic_add_fetch(&g_survey[r][c][0], 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&g_survey[r][c][1], n, __ATOMIC_RELAXED);
}
#define SURVEY(r, n) survey(r, n, __builtin_return_address(0))
#else
#define SURVEY(r, n) ((void)0)
#endif

int posix_memalign(void **out, size_t alignment, size_t size) {
  if (alignment == 0 || (alignment & (alignment - 1)) || alignment % sizeof(void *)) return EINVAL;
  void *p = __libc_memalign(alignment, size);
  if (!p) return ENOMEM;
  *out = p;
#ifdef HOOK_SURVEY
  SURVEY(R_POSIX_MEMALIGN, size);
  if (g_recording && size >= SURVEY_MIN) {
    int a = alignment == C10_ALIGNMENT;
    __atomic_add_fetch(&g_survey_align[a][0], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&g_survey_align[a][1], size, __ATOMIC_RELAXED);
  }
#endif
  if (g_recording && size >= 1 && alignment == C10_ALIGNMENT &&
      (!g_filter_caller || from_c10(__builtin_return_address(0)))) {
    pthread_mutex_lock(&g_lock);
    if (g_recording && set_insert((uint64_t)p)) push(EV_ALLOC, (uint64_t)p, size);
    else if (g_recording) g_dropped++;
    pthread_mutex_unlock(&g_lock);
  }
  return 0;
}

void free(void *p) {
  if (p && g_live) {
    pthread_mutex_lock(&g_lock);
    if (g_live && set_remove((uint64_t)p)) push(EV_FREE, (uint64_t)p, 0);
    pthread_mutex_unlock(&g_lock);
  }
  __libc_free(p);
}

#ifdef HOOK_SURVEY
void *malloc(size_t n) { SURVEY(R_MALLOC, n); return __libc_malloc(n); }
void *calloc(size_t k, size_t n) { SURVEY(R_CALLOC, k * n); return __libc_calloc(k, n); }
void *realloc(void *p, size_t n) {
  if (p && g_live) { /* a recorded pointer must not move silently */
    pthread_mutex_lock(&g_lock);
    if (g_live && set_remove((uint64_t)p)) push(EV_FREE, (uint64_t)p, 0);
    pthread_mutex_unlock(&g_lock);
  }
  SURVEY(R_REALLOC, n);
  return __libc_realloc(p, n);
}
void *aligned_alloc(size_t a, size_t n) { SURVEY(R_ALIGNED_ALLOC, n); return __libc_memalign(a, n); }
void *memalign(size_t a, size_t n) { SURVEY(R_MEMALIGN, n); return __libc_memalign(a, n); }
void *valloc(size_t n) { SURVEY(R_VALLOC, n); return __libc_memalign(4096, n); }
/* out[r*4 + c*2 + {0 calls, 1 bytes}] for r < R_N, then 4 entries for the alignment split */
int hook_survey(uint64_t *out) {
  memcpy(out, g_survey, sizeof g_survey);
  memcpy(out + R_N * 4, g_survey_align, sizeof g_survey_align);
  return R_N;
}
#else
int hook_survey(uint64_t *out) { (void)out; return 0; }
#endif

/* ---- control API for ctypes (capture.py) ---- */

/* Starts (or resumes) recording. filter_caller: keep only calls from libc10.so. Returns the
 * number of libc10.so code segments found (0 means torch is not loaded: nothing would match). */
int hook_start(int filter_caller) {
  pthread_mutex_lock(&g_lock);
  if (!g_events) g_events = map_zeroed(MAX_EVENTS * sizeof(hook_event));
  if (!g_set) g_set = map_zeroed(SET_SIZE * sizeof(uint64_t));
  g_c10_n = 0;
  dl_iterate_phdr(find_c10, 0);
  g_filter_caller = filter_caller;
  g_recording = g_events && g_set;
  pthread_mutex_unlock(&g_lock);
  return g_c10_n;
}

void hook_stop(void) { g_recording = 0; }

void hook_mark(uint64_t label_index) {
  pthread_mutex_lock(&g_lock);
  if (g_events) push(EV_MARK, label_index, 0);
  pthread_mutex_unlock(&g_lock);
}

uint64_t hook_event_count(void) { return g_count; }
const hook_event *hook_events(void) { return g_events; }
uint64_t hook_dropped(void) { return g_dropped; }
uint64_t hook_live(void) { return g_live; }
int hook_is_active(void) { return 1; }
