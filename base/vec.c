/* The one growth rule behind base/vec.h. */
#include "base/base.h"

#include <stdint.h>

void *ev_vec_grow_(void *v, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 8;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return v;
		c *= 2;
	}
	if (elem && c > SIZE_MAX / elem)
		return v;
	void *nv = realloc(v, c * elem);
	if (!nv)
		return v;
	*cap = c;
	return nv;
}
