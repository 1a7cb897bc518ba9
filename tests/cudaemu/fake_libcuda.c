/* libcuda.so.1 of the emulated device: the two driver calls backend-cuda looks up with
 * dlsym (whether a device's primary context exists). Test-only. */
int cuDeviceGet(int *dev, int ordinal);
int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active);

int cuDeviceGet(int *dev, int ordinal)
{
    *dev = ordinal;
    return 0;
}

int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active)
{
    (void)dev;
    *flags = 0;
    *active = 1;
    return 0;
}
