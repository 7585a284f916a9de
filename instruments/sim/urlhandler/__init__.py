"""pyserial URL handlers of the simulated bench (``lumionsim://``)."""
