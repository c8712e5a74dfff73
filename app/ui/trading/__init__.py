"""The person's trading controls in the window: the order ticket, Flatten all, their questions."""
