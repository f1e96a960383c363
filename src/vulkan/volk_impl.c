/* volk's implementation: Debian ships volk as source only, so it is compiled here, once. */
#define VOLK_IMPLEMENTATION
#include <volk.h>
