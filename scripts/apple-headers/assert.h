/* Stand-in for the C library header ring includes: for type-checking the macOS build on Linux only (nothing is linked). */
#define assert(x) ((void)0)
