/* Stand-in for the C library header ring includes: for type-checking the macOS build on Linux only (nothing is linked). */
#include <stddef.h>
void *memcpy(void *, const void *, size_t);
void *memmove(void *, const void *, size_t);
void *memset(void *, int, size_t);
int memcmp(const void *, const void *, size_t);
size_t strlen(const char *);
